"""What one cleaning round did (Kafka ``CleanerStats``), and Kafka's "Log cleaner thread … cleaned log" lines.

Counters follow Kafka's: bytes/records read by the cleaning pass (``bytes_read``, ``records_read``),
what survived (``bytes_written``, ``records_retained``), the map-building pass (``map_bytes_read``,
``map_records_read``), unkeyed records dropped (``invalid_records``) and the key map's fill as Kafka's
buffer would have had it (``buffer_utilization``, 0–1). ``bytes_written`` counts every surviving byte, as
Kafka rewrites them all; ``bytes_skipped`` says how many of them stayed in place because a single-segment
group would have been rewritten byte for byte. Durations come from the injected clock's monotonic time.
Mutable, owned by the round's thread (a parallel path gives each task its own and ``merge``s them).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from service.base.clock import Clock

__all__ = ["CleanerStats"]

_MB = 1024 * 1024


@dataclass(slots=True)
class CleanerStats:
    started_ms: int = -1  # wall clock
    ended_ms: int = -1
    start_monotonic_ms: int = -1
    map_done_monotonic_ms: int = -1
    end_monotonic_ms: int = -1
    bytes_read: int = 0
    bytes_written: int = 0
    bytes_skipped: int = 0
    records_read: int = 0
    records_retained: int = 0
    invalid_records: int = 0
    map_bytes_read: int = 0
    map_records_read: int = 0
    map_size: int = 0
    buffer_utilization: float = 0.0
    spill_classes: int = 0  # the classes the key map spilled to (0: it fit its thread's share)
    groups_rewritten: int = 0
    groups_skipped: int = 0
    segments_read: int = 0

    @classmethod
    def start(cls, clock: Clock) -> CleanerStats:
        return cls(started_ms=clock.now_ms(), start_monotonic_ms=clock.monotonic_ms())

    def map_done(self, clock: Clock) -> None:
        self.map_done_monotonic_ms = clock.monotonic_ms()

    def all_done(self, clock: Clock) -> None:
        self.ended_ms = clock.now_ms()
        self.end_monotonic_ms = clock.monotonic_ms()

    def merge(self, other: CleanerStats) -> None:
        """Add another (per-group) stats' counters to these; timestamps stay this round's."""
        for name in _COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    # -- derived figures -------------------------------------------------------------------------------

    @property
    def elapsed_ms(self) -> int:
        return max(self.end_monotonic_ms - self.start_monotonic_ms, 0)

    @property
    def map_build_ms(self) -> int:
        return max(self.map_done_monotonic_ms - self.start_monotonic_ms, 0)

    @property
    def rewrite_ms(self) -> int:
        return max(self.end_monotonic_ms - max(self.map_done_monotonic_ms, self.start_monotonic_ms), 0)

    @property
    def mb_per_s(self) -> float:
        """Log processed per second (Kafka's first summary line)."""
        return _rate(self.bytes_read, self.elapsed_ms)

    def summary(self, *, log_name: str, first_dirty_offset: int, end_offset: int, thread_id: int = 0) -> str:
        """Kafka's multi-line INFO message for a finished round (``CleanerThread.recordStats``)."""
        elapsed_s = self.elapsed_ms / 1000
        map_s = self.map_build_ms / 1000
        rewrite_s = self.rewrite_ms / 1000
        read_mb = self.bytes_read / _MB
        lines = [
            "",
            f"\tLog cleaner thread {thread_id} cleaned log {log_name} "
            f"(dirty section = [{first_dirty_offset}, {end_offset}])",
            f"\t{read_mb:,.1f} MB of log processed in {elapsed_s:,.1f} seconds "
            f"({_rate(self.bytes_read, self.elapsed_ms):,.1f} MB/sec).",
            f"\tIndexed {self.map_bytes_read / _MB:,.1f} MB in {map_s:.1f} seconds "
            f"({_rate(self.map_bytes_read, self.map_build_ms):,.1f} Mb/sec, "
            f"{_percent(map_s, elapsed_s):.1f}% of total time)",
            f"\tBuffer utilization: {100 * self.buffer_utilization:.1f}%",
            f"\tCleaned {read_mb:,.1f} MB in {rewrite_s:.1f} seconds "
            f"({_rate(self.bytes_read, self.rewrite_ms):,.1f} Mb/sec, "
            f"{_percent(rewrite_s, elapsed_s):.1f}% of total time)",
            f"\tStart size: {read_mb:,.1f} MB ({self.records_read:,d} messages)",
            f"\tEnd size: {self.bytes_written / _MB:,.1f} MB ({self.records_retained:,d} messages)",
            f"\t{100.0 * (1.0 - _ratio(self.bytes_written, self.bytes_read)):.1f}% size reduction "
            f"({100.0 * (1.0 - _ratio(self.records_retained, self.records_read)):.1f}% fewer messages)",
        ]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, int | float]:
        """The counters and durations, snake_case (the ``clean`` ``stats`` document)."""
        doc: dict[str, int | float] = {name: getattr(self, name) for name in _COUNTERS}
        doc.update(
            started_ms=self.started_ms,
            ended_ms=self.ended_ms,
            elapsed_ms=self.elapsed_ms,
            map_build_ms=self.map_build_ms,
            rewrite_ms=self.rewrite_ms,
            mb_per_s=round(self.mb_per_s, 3),
            buffer_utilization=self.buffer_utilization,
            map_size=self.map_size,
            spill_classes=self.spill_classes,
        )
        return doc


_COUNTERS = tuple(
    f.name
    for f in fields(CleanerStats)
    if f.name
    in {
        "bytes_read",
        "bytes_written",
        "bytes_skipped",
        "records_read",
        "records_retained",
        "invalid_records",
        "map_bytes_read",
        "map_records_read",
        "groups_rewritten",
        "groups_skipped",
        "segments_read",
    }
)


def _rate(size_bytes: int, duration_ms: int) -> float:
    return size_bytes / _MB / (duration_ms / 1000) if duration_ms > 0 else 0.0


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 1.0


def _percent(part: float, whole: float) -> float:
    return 100 * part / whole if whole > 0 else 0.0

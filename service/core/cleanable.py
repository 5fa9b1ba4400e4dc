"""Kafka's cleanable range and dirty ratio of a compacted log (``LogCleanerManager.cleanableOffsets``,
``LogToClean``), as pure functions of a log, its cleaner checkpoint and the clock.

The cleaner selects logs with these numbers; ``explain`` shows them, with the reason a log would or would
not be cleaned.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from service.base.errors import LogCleanerError
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log import PartitionLog
from service.storage.log_files import CLEANER_OFFSET_CHECKPOINT
from service.storage.segment import LogSegment
from service.storage.topic_partition import TopicPartition

__all__ = [
    "cleaner_checkpoints",
    "CleanableRange",
    "CleanerReason",
    "LogToClean",
    "UncleanableBound",
    "cleanable_range",
    "log_to_clean",
]


class CleanerReason(enum.StrEnum):
    NOT_COMPACTED = "not-compacted"
    UNKNOWN_TOPIC_CONFIG = "unknown-topic-config"  # its policy is not known: held
    FUTURE_REPLICA = "future-replica"  # a move between log dirs is under way: paused until it ends
    CLEANER_DISABLED = "cleaner-disabled"
    NO_CLEANABLE_BYTES = "no-cleanable-bytes"
    DIRTY_RATIO_AT_OR_BELOW_THRESHOLD = "dirty-ratio-at-or-below-min-cleanable-ratio"
    DIRTY_RATIO_ABOVE_THRESHOLD = "dirty-ratio-above-min-cleanable-ratio"
    MAX_COMPACTION_LAG_EXCEEDED = "max-compaction-lag-exceeded"


class UncleanableBound(enum.StrEnum):
    """What sets the first uncleanable offset (the lowest of Kafka's bounds; on a tie, the first here)."""

    ACTIVE_SEGMENT = "active-segment"
    ABOVE_HIGH_WATERMARK = "above-high-watermark"  # records the broker had not acknowledged
    OPEN_TRANSACTION = "open-transaction"  # the last stable offset, below the high watermark
    MIN_COMPACTION_LAG = "min-compaction-lag"


class CleanableRange(NamedTuple):
    first_dirty_offset: int
    first_uncleanable_offset: int  # not yet rounded to a segment boundary
    checkpoint_was_reset: bool  # the checkpoint was invalid: Kafka rewrites it at once
    bounded_by: UncleanableBound = UncleanableBound.ACTIVE_SEGMENT


class LogToClean(NamedTuple):
    """A candidate with Kafka's byte accounting; ``cleanable_ratio`` drives the choice (highest first)."""

    first_dirty_offset: int
    first_uncleanable_offset: int  # rounded down to the base of the segment holding it
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int
    bounded_by: UncleanableBound = UncleanableBound.ACTIVE_SEGMENT  # what sets the first uncleanable offset

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def needs_compaction_now(self) -> bool:
        return self.max_compaction_delay_ms > 0

    def verdict(self, min_cleanable_ratio: float) -> tuple[bool, CleanerReason]:
        """Eligible iff (max-lag overdue with cleanable bytes) or ratio strictly above the minimum."""
        if self.total_bytes == 0 or self.cleanable_bytes == 0:
            return False, CleanerReason.NO_CLEANABLE_BYTES
        if self.needs_compaction_now:
            return True, CleanerReason.MAX_COMPACTION_LAG_EXCEEDED
        if self.cleanable_ratio > min_cleanable_ratio:
            return True, CleanerReason.DIRTY_RATIO_ABOVE_THRESHOLD
        return False, CleanerReason.DIRTY_RATIO_AT_OR_BELOW_THRESHOLD


def cleanable_range(log: PartitionLog, checkpoint: int | None, now_ms: int) -> CleanableRange:
    """Kafka ``cleanableOffsets``: from the checkpoint (or log start) to the first offset the cleaner must
    not touch."""
    segments = log.segments
    start = log.log_start_offset
    first_dirty = start if checkpoint is None else checkpoint
    reset = False
    if checkpoint is not None and (checkpoint < start or checkpoint > log.log_end_offset):
        first_dirty, reset = start, True
    high_watermark, last_stable = log.high_watermark, log.last_stable_offset
    bounds = [(segments[-1].base_offset, UncleanableBound.ACTIVE_SEGMENT)]
    if last_stable < high_watermark:
        bounds.append((last_stable, UncleanableBound.OPEN_TRANSACTION))
    else:
        bounds.append((high_watermark, UncleanableBound.ABOVE_HIGH_WATERMARK))
    lag_ms = log.config.min_compaction_lag_ms
    if lag_ms > 0:
        for segment in _from_segment_holding(segments[:-1], first_dirty):
            if segment.largest_timestamp()[0] > now_ms - lag_ms:
                bounds.append((segment.base_offset, UncleanableBound.MIN_COMPACTION_LAG))
                break
    uncleanable, bounded_by = min(bounds, key=lambda bound: bound[0])  # the first of equal bounds
    return CleanableRange(first_dirty, max(first_dirty, uncleanable), reset, bounded_by)


def log_to_clean(log: PartitionLog, checkpoint: int | None, now_ms: int) -> LogToClean:
    """Kafka ``LogToClean`` and ``maxCompactionDelay``: byte accounting over the range, and how overdue
    max.compaction.lag.ms makes it."""
    offsets = cleanable_range(log, checkpoint, now_ms)
    segments = log.segments
    rounded = _base_of_segment_holding(segments, offsets.first_uncleanable_offset)
    first_dirty = offsets.first_dirty_offset
    clean_bytes = sum(s.size_bytes for s in _overlapping(segments, -1, first_dirty))
    cleanable_bytes = sum(s.size_bytes for s in _overlapping(segments, min(first_dirty, rounded), rounded))
    return LogToClean(
        first_dirty,
        rounded,
        clean_bytes,
        cleanable_bytes,
        _max_compaction_delay(log, first_dirty, now_ms),
        offsets.bounded_by,
    )


def _max_compaction_delay(log: PartitionLog, first_dirty: int, now_ms: int) -> int:
    max_lag = log.config.max_compaction_lag_ms
    clean_until = now_ms - max(max_lag, 0)
    if clean_until <= 1:  # no first-batch timestamp (≥ 1: 0 and none are passed over) lies before it
        return 0  # (max.compaction.lag.ms at its default, Long.MAX_VALUE): no segment need be read
    earliest = min(
        (
            t
            for s in _from_segment_holding(log.segments[:-1], first_dirty)
            if (t := s.first_batch_timestamp())
        ),
        default=None,
    )
    if earliest is None:
        return 0
    return clean_until - earliest if earliest < clean_until else 0


def _from_segment_holding(segments: list[LogSegment], offset: int) -> list[LogSegment]:
    """The segments from the one holding ``offset`` on."""
    index = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= offset:
            index = i
    return segments[index:]


def _base_of_segment_holding(segments: list[LogSegment], offset: int) -> int:
    """The active segment's base if ``offset`` is in or past it, else the base of the segment holding it."""
    active = segments[-1]
    if offset >= active.base_offset:
        return active.base_offset
    base = segments[0].base_offset
    for segment in segments:
        if segment.base_offset <= offset:
            base = segment.base_offset
    return base


def _overlapping(segments: list[LogSegment], start: int, end: int) -> list[LogSegment]:
    """Segments overlapping [start, end), never the active one (Kafka's ``logSegments(from, to)``)."""
    out = []
    for i, segment in enumerate(segments[:-1]):
        upper = segments[i + 1].base_offset
        if segment.base_offset < end and upper > start:
            out.append(segment)
    return out


def cleaner_checkpoints(
    logs: Iterable[PartitionLog], *, on_unreadable: Callable[[Path, Exception], None] | None = None
) -> dict[TopicPartition, int]:
    """Each log's first dirty offset as the ``cleaner-offset-checkpoint`` of its own dir has it (none: not in
    the file). Each file is read once. A partition may have an entry in two dirs' files (a broker's future
    replica, moving to another dir, has its own), so the entries are never merged across dirs.
    ``on_unreadable``: a file that cannot be read is reported there and counts as empty; without it, the
    error is raised."""
    by_dir: dict[Path, dict[TopicPartition, int]] = {}
    out: dict[TopicPartition, int] = {}
    for log in logs:
        log_dir = log.log_dir
        entries = by_dir.get(log_dir)
        if entries is None:
            try:
                entries = OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT).read()
            except (OSError, LogCleanerError) as exc:
                if on_unreadable is None:
                    raise
                on_unreadable(log_dir, exc)
                entries = {}
            by_dir[log_dir] = entries
        offset = entries.get(log.topic_partition)
        if offset is not None:
            out[log.topic_partition] = offset
    return out

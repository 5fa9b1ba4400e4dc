"""``measure_round``: what a cleaning round would free, decided as the round decides it and written
nowhere. Each case measures a real log, then runs the real round (``Cleaner.clean``) on it: the bytes the
measure says are freed are the bytes the ``.log`` files lose, to the byte, and measuring changes no file."""

from __future__ import annotations

from pathlib import Path

from cleaner.compaction.measure import RoundMeasure, measure_round
from service.base.clock import ManualClock
from service.storage.compression import CompressionType
from service.storage.log import PartitionLog
from service.storage.records import Record
from tests.cleaner.helpers import DAY_MS, Producer, all_batches, clean, keyed, new_log, tomb


def log_bytes(log: PartitionLog) -> int:
    return sum(s.size_bytes for s in log.segments)


def files(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file's size and mtime: what measuring must leave as it was."""
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


def measure_then_clean(log: PartitionLog, clock: ManualClock, first_dirty: int = 0) -> RoundMeasure:
    """Measure the round over the log's sealed segments, check it left every file alone, clean, and
    check the measure against what the round freed."""
    upper = log.active_segment.base_offset
    before_files = files(log.directory)
    reads: list[int] = []
    measure = measure_round(log, first_dirty, upper, clock, on_read=reads.append)
    assert files(log.directory) == before_files, "measuring writes nothing"
    assert sum(reads) == measure.bytes_read
    before = log_bytes(log)
    clean(log, clock, first_dirty, upper)
    assert measure.bytes_freed == before - log_bytes(log)
    return measure


def test_superseded_keys_are_freed_to_the_byte(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    for i in range(60):
        log.append_records([keyed(i % 7, i)])
    measure = measure_then_clean(log, clock)
    assert measure.bytes_freed > 0


def test_a_log_of_distinct_keys_frees_nothing(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    for i in range(60):
        log.append_records([keyed(i)])
    assert measure_then_clean(log, clock).bytes_freed == 0


def test_records_of_a_batch_are_filtered_and_the_batch_rebuilt_compressed(
    log_dir: Path, clock: ManualClock
) -> None:
    """A gzip batch that keeps some records is rewritten and recompressed as the round writes it."""
    log = new_log(log_dir, clock, segment_bytes=600)
    for round_ in range(12):
        log.append_records(
            [Record(0, -1, b"%d" % (i % 9), b"value-%d-%d" % (round_, i)) for i in range(10)],
            compression=CompressionType.GZIP,
        )
    assert len(log.segments) > 2
    assert measure_then_clean(log, clock).bytes_freed > 0
    rebuilt = [b for b in all_batches(log) if 0 < b.records_count < 10]
    assert rebuilt and all(b.compression is CompressionType.GZIP for b in rebuilt)


def test_tombstones_past_their_horizon_and_aborted_data_go(log_dir: Path, clock: ManualClock) -> None:
    """A second round after ``delete.retention.ms``: the tombstones the first round stamped with a delete
    horizon go; data of an aborted transaction goes, its marker with it once nothing needs it."""
    log = new_log(log_dir, clock)
    txn = Producer(log, producer_id=5)
    for i in range(20):
        log.append_records([keyed(i % 5, i)])
    txn.send(100, 101, 102)
    txn.abort()
    for i in range(5):
        log.append_records([tomb(i)])
    for i in range(20):
        log.append_records([keyed(50 + i)])
    measure_then_clean(log, clock)
    clock.advance(DAY_MS + 1)
    log.roll()  # every record so far in a sealed segment
    second = measure_then_clean(log, clock)
    assert second.bytes_freed > 0
    assert not [r for b in all_batches(log) if not b.is_control for r in b.records() if r.value is None]


def test_nothing_to_measure_below_the_first_dirty_offset(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    for i in range(30):
        log.append_records([keyed(i % 3)])
    active = log.active_segment.base_offset
    assert measure_round(log, active, active, clock) == RoundMeasure(0, 0)
    first_sealed_end = log.segments[1].base_offset
    assert measure_round(log, first_sealed_end, first_sealed_end + 1, clock) == RoundMeasure(0, 0), (
        "an upper bound inside a segment rounds down to that segment's base"
    )


def test_bytes_read_are_the_dirty_section_then_every_segment_below_the_map_end(
    log_dir: Path, clock: ManualClock
) -> None:
    log = new_log(log_dir, clock)
    for i in range(100):
        log.append_records([keyed(i % 4)])
    sealed = log.segments[:-1]
    first_dirty = sealed[2].base_offset
    dirty_bytes = sum(s.size_bytes for s in sealed[2:])
    measure = measure_round(log, first_dirty, log.active_segment.base_offset, clock)
    assert measure.bytes_read == dirty_bytes + sum(s.size_bytes for s in sealed)

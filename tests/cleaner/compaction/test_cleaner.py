"""Cleaning rounds on real logs: cases of Kafka's LogCleanerTest, plus skipping unchanged segments and
cleaning up after an abort or an error."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from cleaner.compaction.rules import active_producers
from cleaner.compaction.stats import CleanerStats
from cleaner.compaction.txn_metadata import CleanedTransactionMetadata
from cleaner.errors import CleaningAbortedError
from service.base.clock import ManualClock
from service.base.errors import CorruptDataError
from service.core.tasks import ManualTaskScheduler
from service.storage.log import PartitionLog
from service.storage.segment import LogSegment
from tests.cleaner.helpers import (
    DAY_MS,
    LONG_MAX,
    all_batches,
    clean,
    clean_result,
    compact_config,
    follower_log,
    keyed,
    keys,
    make_cleaner,
    new_log,
    offsets,
    tomb,
)


def fill(log: PartitionLog, segments: int) -> None:
    """Kafka's ``while (numberOfSegments < n) append(record(LEO, LEO))``: key = value = offset."""
    while len(log.segments) < segments:
        log.append_records([keyed(log.log_end_offset)])


def clean_with_fake_map(
    log: PartitionLog, group: list[LogSegment], superseded: set[int], upper_bound: int, clock: ManualClock
) -> CleanerStats:
    """Kafka's ``cleanSegments`` with a FakeOffsetMap: ``superseded`` keys map to Long.MAX."""
    stats = CleanerStats()
    make_cleaner(clock).clean_segments(
        log,
        group,
        lookup=lambda key: LONG_MAX if int(key) in superseded else -1,
        map_latest_offset=LONG_MAX,
        upper_bound=upper_bound,
        now_ms=clock.now_ms(),
        txn_state=CleanedTransactionMetadata(),
        active_producers=active_producers(log),
        stats=stats,
    )
    return stats


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_clean_segments(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    fill(log, 4)
    assert keys(log) == list(range(log.log_end_offset))
    superseded = {1, 3, 5, 7, 9}
    group = log.segments[:3]
    should_remain = [k for k in keys(log) if k not in superseded]
    stats = clean_with_fake_map(log, group, superseded, log.segments[3].base_offset, clock)
    assert keys(log) == should_remain
    assert stats.bytes_read == sum(s.size_bytes for s in group)


def test_cleaning_with_deletes(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    fill(log, 2)
    n = log.log_end_offset
    for key in range(0, n, 2):
        log.append_records([tomb(key)])
    while len(log.segments) < 4:
        log.append_records([keyed(log.log_end_offset + 1000)])
    clean(log, clock)
    remaining = set(keys(log))
    assert not remaining & set(range(0, n, 2))
    assert set(range(1, n, 2)) <= remaining
    assert all(b.delete_horizon_ms == clock.now_ms() + DAY_MS for b in all_batches(log) if _has_tomb(b))


def _has_tomb(batch: object) -> bool:
    return any(r.value is None for r in batch.records())  # type: ignore[attr-defined]


def test_horizon_is_cleaning_time_not_record_time(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=1_073_741_824, segment_index_bytes=10_485_760)
    now = clock.now_ms()
    log.append_records([keyed(0, 0, timestamp=now + DAY_MS + 10_000)])
    log.roll()
    clean(log, clock, 0, 1)
    log.append_records([tomb(0, timestamp=now - DAY_MS - 10_000)])
    log.roll()
    clean(log, clock, 1, 2)
    assert all_batches(log)[0].last_offset == 1, "the tombstone is retained"
    assert all_batches(log)[0].delete_horizon_ms == now + DAY_MS
    log.append_records([keyed(1)])
    log.roll()
    clean(log, clock, 2, 3)
    assert all_batches(log)[0].last_offset == 1, "still before the horizon"


def test_uncleanable_section_protects_its_whole_segment(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    while len(log.segments) < 7:
        log.append_records([keyed(log.log_end_offset % 10, b"%090d" % log.log_end_offset)])
    protected = log.segments[2].base_offset
    before = files(log_dir)
    clean(log, clock, 0, protected + 1)
    cleaned_keys = [
        r.key for s in log.segments if s.base_offset < protected for b in s.batches() for r in b.records()
    ]
    assert len(cleaned_keys) == len(set(cleaned_keys)) == 10
    after = files(log_dir)
    for name, content in before.items():
        if name[0].isdigit() and int(name.split(".")[0]) >= protected:
            assert after[name] == content, name


def test_cleaning_with_unkeyed_messages(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, cleanup_policy=frozenset({"delete"}))
    unkeyed = 0
    while len(log.segments) < 2:
        log.append_records([keyed(b"x", b"test")._replace(key=None)])
        unkeyed += 1
    unkeyed -= 1  # the append that rolled went into the second segment
    unkeyed_bytes = log.segments[0].size_bytes
    while len(log.segments) < 3:
        log.append_records([keyed(log.log_end_offset)])
    size_before = log.size_bytes - log.active_segment.size_bytes
    trailing_unkeyed = next(b for b in all_batches(log) if b.base_offset >= log.segments[1].base_offset)
    result = clean_result(log, clock)
    assert all(r.key is not None for b in all_batches(log) for r in b.records())
    removed = unkeyed_bytes + trailing_unkeyed.size_bytes
    assert log.size_bytes - log.active_segment.size_bytes == size_before - removed
    assert result.stats.invalid_records == unkeyed + 1


def test_last_batch_of_the_round_is_kept_empty(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    fill(log, 4)
    upper = log.segments[3].base_offset
    clean_with_fake_map(log, log.segments[:3], set(range(upper)), upper, clock)
    assert len(log.segments) == 2
    batches = list(log.segments[0].batches())
    assert len(batches) == 1
    assert (batches[0].records_count, batches[0].last_offset) == (0, upper - 1)


@pytest.mark.parametrize(
    ("segments", "upper"),
    [
        ([list(range(10)), [11]], 11),
        ([list(range(10)), list(range(15, 25)), [30]], 30),
    ],
)
def test_cleaning_beyond_missing_offsets(
    log_dir: Path, clock: ManualClock, segments: list[list[int]], upper: int
) -> None:
    records = [[keyed(o)._replace(offset=o) for o in segment] for segment in segments]
    log = follower_log(log_dir, clock, records, empty_active=False)
    assert log.active_segment.base_offset == upper
    assert clean(log, clock, 0, upper) == upper


def test_cleaned_segment_is_trimmed(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, preallocate=True)
    for key in range(5):
        log.append_records([keyed(key % 2)])
    log.roll()
    clean(log, clock, 2, 5)
    first = log.segments[0]
    assert os.path.getsize(first.log_path) == first.size_bytes < 1024
    assert first.offset_index.path.stat().st_size == first.offset_index.size_in_bytes


def test_concurrent_segment_deletion(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, cleanup_policy=frozenset({"compact", "delete"}))
    for _ in range(3):
        log.append_records([keyed(0)])
        log.roll()
    original_replace = log.replace_segments
    deleted: list[LogSegment] = []

    def retention_first(cleaned: Sequence[LogSegment], old: Sequence[LogSegment]) -> list[LogSegment]:
        log.increment_log_start_offset(log.active_segment.base_offset)
        deleted.extend(log.delete_oldest_segments(3))
        return original_replace(cleaned, old)

    log.replace_segments = retention_first  # type: ignore[method-assign]
    scheduler = ManualTaskScheduler(clock)
    make_cleaner(clock, scheduler=scheduler).clean(log, 0, 3)
    names = sorted(p.name for p in log_dir.iterdir())
    assert "00000000000000000000.log.deleted" in names
    assert not [n for n in names if n.endswith(".deleted.deleted")], "renamed exactly once"
    assert len(log.segments) == 2
    assert scheduler.pending == 0, "nothing left of the old segments for the cleaner to delete"


def test_abort_before_anything_is_written(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    fill(log, 4)
    before = files(log_dir)

    def aborted() -> None:
        raise CleaningAbortedError("aborted")

    with pytest.raises(CleaningAbortedError):
        make_cleaner(clock, check_aborted=aborted).clean(log, 0, log.active_segment.base_offset)
    assert files(log_dir) == before


@pytest.mark.parametrize("abort_at_call", [2, 3, 5, 8])
def test_abort_mid_round_deletes_the_groups_cleaned_files(
    log_dir: Path, clock: ManualClock, abort_at_call: int
) -> None:
    log = new_log(log_dir, clock, segment_bytes=300)
    for i in range(40):
        log.append_records([keyed(i % 7, b"%d" % i)])
    latest = {k: v for k, v in ((r.key, r.value) for b in all_batches(log) for r in b.records())}
    calls = 0

    def abort_later() -> None:
        nonlocal calls
        calls += 1
        if calls >= abort_at_call:
            raise CleaningAbortedError("aborted")

    with pytest.raises(CleaningAbortedError):
        make_cleaner(clock, check_aborted=abort_later).clean(log, 0, log.active_segment.base_offset)
    assert not [p for p in log_dir.iterdir() if p.name.endswith(".cleaned")]
    assert {r.key: r.value for b in all_batches(log) for r in b.records()} == latest


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda path: _overwrite(path, 16, b"\xff"), id="bad-magic"),
        pytest.param(lambda path: _overwrite(path, 100, b"\x00\x01"), id="bad-crc"),
        pytest.param(lambda path: os.truncate(path, 1000), id="truncated"),
    ],
)
def test_corrupt_segment_raises_and_leaves_no_cleaned_files(
    log_dir: Path, clock: ManualClock, corrupt: Callable[[Path], None]
) -> None:
    log = new_log(log_dir, clock, segment_bytes=2048)
    for i in range(60):
        log.append_records([keyed(i % 5)])
    corrupt(log.segments[1].log_path)
    with pytest.raises(CorruptDataError):
        clean(log, clock)
    assert not [p for p in log_dir.iterdir() if p.name.endswith(".cleaned")]


def _overwrite(path: Path, position: int, data: bytes) -> None:
    with open(path, "r+b") as file:
        file.seek(position)
        file.write(data)


def test_unchanged_segments_are_not_rewritten(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=400)
    for i in range(30):
        log.append_records([keyed(i % 4, b"%d" % i) if i % 3 else keyed(100 + i)])
    log.append_records([tomb(1)])
    log.roll()
    first = clean_result(log, clock)
    assert first.stats.groups_rewritten >= 1
    merged = clean_result(log, clock, first.end_offset, first.end_offset)
    assert merged.stats.groups_rewritten >= 1, "the shrunken segments merge in the next round"
    before = files(log_dir)
    mtimes = {p.name: p.stat().st_mtime_ns for p in log_dir.iterdir()}
    second = clean_result(log, clock, first.end_offset, first.end_offset)
    assert second.stats.groups_rewritten == 0
    assert second.stats.groups_skipped == len(log.segments) - 1
    assert second.stats.bytes_skipped == second.stats.bytes_written == first.stats.bytes_written
    assert files(log_dir) == before
    assert {p.name: p.stat().st_mtime_ns for p in log_dir.iterdir()} == mtimes


def test_cleaned_segment_keeps_the_last_source_mtime_and_old_files_wait(
    log_dir: Path, clock: ManualClock
) -> None:
    log = new_log(log_dir, clock, file_delete_delay_ms=60_000)
    for key in (1, 2, 1, 2, 3):
        log.append_records([keyed(key)])
    log.roll()
    log.segments[0].set_last_modified_ms(1_234_000)
    scheduler = ManualTaskScheduler(clock)
    make_cleaner(clock, scheduler=scheduler).clean(log, 0, 5)
    assert log.segments[0].last_modified_ms() == 1_234_000
    assert os.stat(log.segments[0].log_path).st_mtime_ns // 1_000_000 == 1_234_000
    deleted = [p.name for p in log_dir.iterdir() if p.name.endswith(".deleted")]
    assert "00000000000000000000.log.deleted" in deleted
    scheduler.advance(59_999)
    assert [p for p in log_dir.iterdir() if p.name.endswith(".deleted")]
    scheduler.advance(1)
    assert not [p for p in log_dir.iterdir() if p.name.endswith(".deleted")]
    assert offsets(log) == [2, 3, 4]


def test_upper_bound_below_first_dirty_does_nothing(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    for key in range(10):
        log.append_records([keyed(key % 2)])
    log.roll()
    before = files(log_dir)
    assert clean(log, clock, 5, 3) == 5
    assert files(log_dir) == before


def test_upper_bound_is_never_past_the_active_segment(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    for key in range(10):
        log.append_records([keyed(key % 2)])
    assert clean(log, clock, 0, 100) == 0, "everything is in the active segment"
    assert offsets(log) == list(range(10))


def test_segments_merged_away_by_cleaning_take_their_producer_snapshots(
    log_dir: Path, clock: ManualClock
) -> None:
    """Kafka's replaceSegments deletes the snapshots of the old segments no cleaned segment replaces."""
    log = new_log(log_dir, clock, segment_bytes=1024)
    for i in range(60):
        log.append_records([keyed(i % 4)])
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    snapshots = sorted(p.name for p in log_dir.glob("*.snapshot"))
    assert snapshots == [f"{b:020d}.snapshot" for b in bases[1:]]
    log.config = compact_config(segment_bytes=1 << 20)  # every sealed segment now fits one group
    clean(log, clock)
    kept = {s.base_offset for s in log.segments}
    assert len(kept) < len(bases), "the round merged segments"
    expected = [f"{b:020d}.snapshot" for b in bases[1:] if b in kept]
    assert sorted(p.name for p in log_dir.glob("*.snapshot")) == expected
    assert not list(log_dir.glob("*.deleted"))

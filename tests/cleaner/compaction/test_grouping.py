"""Segment grouping (Kafka ``groupSegmentsBySize``): the cases of ``LogCleanerTest.testSegmentGrouping*``."""

from __future__ import annotations

from pathlib import Path

from cleaner.compaction.grouping import group_segments_by_size
from service.base.clock import ManualClock
from service.storage.loader import load_partition_log
from service.storage.records import Record
from service.storage.segment import LogSegment
from tests.cleaner.helpers import clean, follower_log, keyed, keys, new_log

INT_MAX = 2**31 - 1
UNLIMITED = 2**62


def at(offset: int, key: int = 0) -> Record:
    return keyed(key)._replace(offset=offset)


def bases(groups: list[list[LogSegment]]) -> list[list[int]]:
    return [[s.base_offset for s in group] for group in groups]


def test_segment_grouping(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=300, index_interval_bytes=1)
    while len(log.segments) < 10:
        log.append_records([keyed(b"hello", b"hello")])
    segments = log.segments
    leo = log.log_end_offset
    assert [s.size_bytes for s in segments[:-1]] == [3 * 78] * 9

    groups = group_segments_by_size(segments, UNLIMITED, UNLIMITED, leo)
    assert bases(groups) == [[s.base_offset for s in segments]]
    assert len(group_segments_by_size(segments, 1, UNLIMITED, leo)) == 10
    assert len(group_segments_by_size(segments, UNLIMITED, 1, leo)) == 10

    max_size = sum(s.size_bytes for s in segments[:3]) + 1
    groups = group_segments_by_size(segments, max_size, UNLIMITED, leo)
    assert [len(g) for g in groups[:-1]] == [3] * (len(groups) - 1)
    assert [s for g in groups for s in g] == segments, "order preserved, nothing lost"

    max_index = sum(s.offset_index.size_in_bytes for s in segments[:3]) + 1
    groups = group_segments_by_size(segments, UNLIMITED, max_index, leo)
    assert [len(g) for g in groups[:-1]] == [3] * (len(groups) - 1)
    assert [s for g in groups for s in g] == segments

    max_time_index = sum(s.time_index.size_in_bytes for s in segments[:3]) + 1
    groups = group_segments_by_size(segments, UNLIMITED, max_time_index, leo)
    assert all(sum(s.time_index.size_in_bytes for s in g) < max_time_index for g in groups)


def test_sparse_offsets(log_dir: Path, clock: ManualClock) -> None:
    first = [at(i) for i in range(4)]
    log = follower_log(log_dir, clock, [first, [at(INT_MAX - 1), at(INT_MAX)]])
    groups = group_segments_by_size(log.segments, UNLIMITED, UNLIMITED, log.log_end_offset)
    assert len(groups) == 1, "the span from 0 to 2^31 - 1 still fits"

    other = log_dir.parent / "other-0"
    log = follower_log(other, clock, [first, [at(INT_MAX - 1), at(INT_MAX), at(INT_MAX + 1)]])
    groups = group_segments_by_size(log.segments, UNLIMITED, UNLIMITED, log.log_end_offset)
    assert bases(groups) == [[0], [INT_MAX - 1, INT_MAX + 2]]
    for group in groups:
        last = group[-1]
        assert last.read_next_offset() - 1 - group[0].base_offset <= INT_MAX


def test_sparse_offsets_and_empty_segments(log_dir: Path, clock: ManualClock) -> None:
    span = 2**31
    segments = [[at(i * span), at((i + 1) * span - 1)] for i in range(3)]
    log = follower_log(log_dir, clock, [*segments, [at(3 * span)]], empty_active=False)
    cleanable = log.segments[:3]
    assert len(group_segments_by_size(cleanable, UNLIMITED, UNLIMITED, 3 * span)) == 3

    end = clean(log, clock, 0, 3 * span)
    assert end == 3 * span
    assert len(log.segments) == 4
    assert [s.size_bytes for s in log.segments[:2]] == [0, 0]
    groups = group_segments_by_size(log.segments[:3], UNLIMITED, UNLIMITED, 3 * span)
    assert bases(groups) == [[0, span], [2 * span]], "the two empty segments merge"

    clean(log, clock, 0, 3 * span)
    assert len(log.segments) == 3


def test_grouping_uses_base_offsets_not_stale_indexes(log_dir: Path, clock: ManualClock) -> None:
    half = 2**30
    log = follower_log(log_dir, clock, [[at(0), at(1)], [at(half), at(2**31 + 1)]])
    groups = group_segments_by_size(log.segments[:2], UNLIMITED, UNLIMITED, log.active_segment.base_offset)
    assert bases(groups) == [[0], [half]]
    for group in groups:
        assert group[-1].read_next_offset() - 1 - group[0].base_offset <= INT_MAX


def test_a_cleaned_segment_may_need_more_index_entries_than_its_group_had(
    log_dir: Path, clock: ManualClock
) -> None:
    """Kafka's grouping counts the old indexes' entries, but compaction shrinks batches, and a batch is
    indexed only when the bytes since the last entry pass ``index.interval.bytes``: segments of one large
    batch each have no entry at all, while their shrunken batches side by side need one each. The cleaned
    segment's index grows past ``segment.index.bytes`` (2 entries here) instead of failing the round."""
    log = new_log(log_dir, clock, segment_bytes=4096, segment_index_bytes=16, index_interval_bytes=100)
    for i in range(8):  # 8 segments of one 30-record batch: keys 0..28 superseded by the next batch's
        log.append_records([keyed(k, i) for k in range(29)] + [keyed(100 + i)])
        log.roll()
    log.append_records([keyed(k, 99) for k in range(29)])
    assert all(s.offset_index.entries == 0 for s in log.segments)
    clean(log, clock)
    [cleaned, _active] = log.segments
    assert cleaned.offset_index.entries > 2  # more than segment.index.bytes holds
    assert keys(log) == [*range(100, 107), *range(29), 107, *range(29)]  # the active segment not cleaned
    entries = cleaned.offset_index.entries
    log.close()
    reopened = load_partition_log(log_dir, log.config, clock=clock, clean_shutdown=True).log
    assert reopened.segments[0].offset_index.entries == entries  # the whole index reads back

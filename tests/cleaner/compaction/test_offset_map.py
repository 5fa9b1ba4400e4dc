"""The key map and its building (cases of Kafka's LogCleanerTest), and the utilization Kafka would report."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from cleaner.compaction.offset_map import OffsetMap, build_offset_map
from cleaner.compaction.stats import CleanerStats
from service.base.clock import ManualClock
from tests.cleaner.helpers import (
    Producer,
    clean,
    clean_result,
    follower_log,
    keyed,
    keys,
    new_log,
    offsets,
)


def test_put_get_latest_offset_and_clear() -> None:
    offset_map = OffsetMap()
    assert (offset_map.get(b"k"), offset_map.latest_offset, offset_map.size) == (-1, -1, 0)
    offset_map.put(b"k", 3)
    offset_map.put(b"j", 5)
    offset_map.put(b"k", 7)
    assert (offset_map.get(b"k"), offset_map.get(b"j"), offset_map.latest_offset, offset_map.size) == (
        7,
        5,
        7,
        2,
    )
    offset_map.update_latest_offset(10)
    assert offset_map.latest_offset == 10
    offset_map.clear()
    assert (offset_map.get(b"k"), offset_map.latest_offset, offset_map.size) == (-1, -1, 0)


def test_keys_are_exact_bytes_never_hashes() -> None:
    offset_map = OffsetMap()
    offset_map.put(b"a" * 1000, 1)
    offset_map.put(b"a" * 999 + b"b", 2)
    offset_map.put(b"", 3)
    assert [offset_map.get(b"a" * 1000), offset_map.get(b"a" * 999 + b"b"), offset_map.get(b"")] == [1, 2, 3]


@pytest.mark.parametrize(
    ("entries", "buffer_bytes", "load_factor", "expected"),
    [
        (0, 134_217_728, 0.9, 0.0),
        (5, 240, 0.9, 50.0),  # 10 slots of 24 bytes
        (20, 240, 0.9, 90.0),  # Kafka's map would be full at 9 keys: it reports 90 %, never more
        (3, 4 * 24, 0.75, 75.0),
        (1, 10, 0.9, 0.0),  # no slot at all
    ],
)
def test_kafka_utilization_percent(
    entries: int, buffer_bytes: int, load_factor: float, expected: float
) -> None:
    offset_map = OffsetMap()
    for i in range(entries):
        offset_map.put(b"%d" % i, i)
    assert offset_map.kafka_utilization_percent(buffer_bytes, load_factor) == pytest.approx(expected)


def test_utilization_caps_the_buffer_at_int_max() -> None:
    offset_map = OffsetMap()
    offset_map.put(b"k", 0)
    assert offset_map.kafka_utilization_percent(1 << 40) == pytest.approx(100 / ((2**31 - 1) // 24))


def test_partial_segment_clean(log_dir: Path, clock: ManualClock) -> None:
    """A map holding one key: each round maps one record and leaves the rest of the dirty section."""
    log = new_log(log_dir, clock)
    for key in (0, 1, 0, 1, 0):
        log.append_records([keyed(key)])
    log.roll()
    assert clean(log, clock, 2, 5, max_map_entries=1) == 3
    assert (keys(log), offsets(log)) == ([1, 0, 1, 0], [1, 2, 3, 4])
    assert clean(log, clock, 3, 5, max_map_entries=1) == 4
    assert (keys(log), offsets(log)) == ([0, 1, 0], [2, 3, 4])
    assert clean(log, clock, 4, 5, max_map_entries=1) == 5
    assert (keys(log), offsets(log)) == ([1, 0], [3, 4])


def test_cleaner_stats(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    for key in (0, 1, 0, 1, 0):
        log.append_records([keyed(key)])
    log.roll()
    size_before = log.size_bytes
    result = clean_result(log, clock, 2, 5, max_map_entries=3)
    stats = result.stats
    assert result.end_offset == 5
    assert stats.records_read == 5
    assert stats.bytes_read == size_before
    assert stats.records_retained == 2
    assert stats.bytes_written == log.size_bytes
    assert stats.invalid_records == 0
    assert (stats.map_size, stats.map_records_read) == (2, 5)


def test_build_offset_map(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    for i in range(500):
        log.append_records([keyed(i)])
    segments = log.segments
    end = log.log_end_offset
    bounds = [0, segments[1].base_offset, segments[3].base_offset, end]
    for start, stop in itertools.pairwise(bounds):
        offset_map, stats = OffsetMap(), CleanerStats()
        assert not build_offset_map(segments, start, stop, offset_map, stats)
        assert offset_map.latest_offset + 1 == stop
        assert offset_map.size == stop - start
        assert all(offset_map.get(b"%d" % i) == i for i in range(start, stop))
        assert all(offset_map.get(b"%d" % i) == -1 for i in [*range(start), *range(stop, end)])
        assert stats.map_records_read == stop - start


def test_build_partial_offset_map(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    for i in range(5):
        log.append_records([keyed(i)])
    log.roll()
    offset_map, stats = OffsetMap(), CleanerStats()
    assert build_offset_map(log.segments, 2, 5, offset_map, stats, max_entries=2), "the map filled up"
    assert offset_map.size == 2
    assert [offset_map.get(b"%d" % i) for i in range(5)] == [-1, -1, 2, 3, -1]
    assert offset_map.latest_offset == 3
    assert stats.map_records_read == 4


def test_build_offset_map_fake_large(log_dir: Path, clock: ManualClock) -> None:
    far = 7_206_178
    log = follower_log(log_dir, clock, [[keyed(0)._replace(offset=0)], [keyed(1)._replace(offset=far)]])
    assert [s.base_offset for s in log.segments] == [0, far, far + 1]
    offset_map = OffsetMap()
    build_offset_map(log.segments, 0, far + 1, offset_map, CleanerStats())
    assert offset_map.latest_offset == far
    assert offset_map.size == 2
    assert (offset_map.get(b"0"), offset_map.get(b"1")) == (0, far)


def test_aborted_data_and_control_records_never_enter_the_map(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    log.append_records([keyed(1, b"committed")])
    producer = Producer(log, 7)
    producer.send(1, 2)
    producer.abort()
    log.roll()
    offset_map = OffsetMap()
    build_offset_map(log.segments, 0, log.active_segment.base_offset, offset_map, CleanerStats())
    assert offset_map.size == 1
    assert offset_map.get(b"1") == 0, "aborted data never shadows the committed value"
    assert offset_map.latest_offset == 3

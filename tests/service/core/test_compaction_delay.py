"""``CompactionDelayTracker`` on real logs: since when each compacted partition has been cleanable.

A high dirty share under a higher ``min.cleanable.dirty.ratio`` is 0 however long it lasts; a partition
above its ratio counts from the update that first found it so, with the same first dirty offset (a cleaning
moves it and the count starts over); past ``max.compaction.lag.ms`` it counts from when the lag passed for its
oldest dirty batch. Offline partitions keep their last state; partitions in neither are forgotten.
``read_cleaner_checkpoints`` reads each log dir's file, an unreadable one counting as empty. (The series on
``/metrics`` a daemon exports are in ``tests/api/metrics/test_metrics_compaction_delay.py``.)"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.core.cleanable import log_to_clean
from service.core.compaction_delay import CompactionDelayTracker, read_cleaner_checkpoints
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log import PartitionLog
from service.storage.log_files import CLEANER_OFFSET_CHECKPOINT
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.retention_helpers import START_MS, new_partition_log

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
ONE_RECORD_SEGMENTS = 100  # segment.bytes: one ~73-byte batch per segment


def append(log: PartitionLog, count: int, timestamp: int) -> None:
    """``count`` batches of one record, all under one key: a segment each."""
    for n in range(count):
        log.append_records([Record(0, timestamp, b"key", b"value-%d" % n)])


def compacted_log(
    tmp_path: Path, clock: ManualClock, name: str = "profiles-0", **fields: object
) -> PartitionLog:
    return new_partition_log(
        tmp_path / "logs" / name, clock, policy="compact", segment_bytes=ONE_RECORD_SEGMENTS, **fields
    )


def test_dirty_under_a_higher_ratio_is_not_late_and_cleanable_counts_until_the_checkpoint_moves(
    tmp_path: Path,
) -> None:
    clock = ManualClock(START_MS)
    log = compacted_log(tmp_path, clock, min_cleanable_dirty_ratio=0.99)
    append(log, 15, clock.now_ms())
    tp = log.topic_partition
    ratio = log_to_clean(log, 1, clock.now_ms()).cleanable_ratio
    assert 0.9 < ratio <= 0.99  # most of it dirty, yet not above 0.99
    tracker = CompactionDelayTracker()

    assert tracker.update({tp: log}, {tp: 1}, now_ms=clock.now_ms()) == {tp: 0}
    clock.advance(2 * HOUR_MS)
    assert tracker.update({tp: log}, {tp: 1}, now_ms=clock.now_ms()) == {tp: 0}  # however long it stays so

    log.config = replace(log.config, min_cleanable_dirty_ratio=0.5)
    assert tracker.update({tp: log}, {tp: 1}, now_ms=clock.now_ms()) == {tp: 0}  # first found cleanable
    clock.advance(10 * MINUTE_MS)
    assert tracker.update({tp: log}, {tp: 1}, now_ms=clock.now_ms()) == {tp: 10 * MINUTE_MS}

    clock.advance(MINUTE_MS)  # a cleaning moved the first dirty offset; dirty enough still: counts afresh
    assert tracker.update({tp: log}, {tp: 2}, now_ms=clock.now_ms()) == {tp: 0}
    clock.advance(MINUTE_MS)
    assert tracker.update({tp: log}, {tp: 2}, now_ms=clock.now_ms()) == {tp: MINUTE_MS}
    last = log.active_segment.base_offset  # all clean: not cleanable, and forgotten as such
    assert tracker.update({tp: log}, {tp: last}, now_ms=clock.now_ms()) == {tp: 0}
    assert tracker.update({tp: log}, {tp: 2}, now_ms=clock.now_ms()) == {tp: 0}


def test_past_max_compaction_lag_it_counts_from_when_the_lag_passed(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    # a ratio no log exceeds: only max.compaction.lag.ms can make it due
    log = compacted_log(tmp_path, clock, min_cleanable_dirty_ratio=1.0)
    append(log, 2, clock.now_ms() - 3 * HOUR_MS)
    tp = log.topic_partition
    tracker = CompactionDelayTracker()
    assert tracker.update({tp: log}, {}, now_ms=clock.now_ms()) == {tp: 0}  # the lag is Long.MAX by default

    log.config = replace(log.config, max_compaction_lag_ms=HOUR_MS)

    assert tracker.update({tp: log}, {}, now_ms=clock.now_ms()) == {tp: 2 * HOUR_MS}
    clock.advance(MINUTE_MS)
    assert tracker.update({tp: log}, {}, now_ms=clock.now_ms()) == {tp: 2 * HOUR_MS + MINUTE_MS}


def test_only_compacted_logs_offline_ones_keep_growing_and_the_rest_are_forgotten(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    log = compacted_log(tmp_path, clock, min_cleanable_dirty_ratio=0.1)
    orders = new_partition_log(tmp_path / "logs" / "orders-0", clock, segment_bytes=ONE_RECORD_SEGMENTS)
    append(log, 5, clock.now_ms())
    append(orders, 5, clock.now_ms())
    tp, never = log.topic_partition, TopicPartition("gone", 0)
    tracker = CompactionDelayTracker()
    assert tracker.update({tp: log, orders.topic_partition: orders}, {}, now_ms=clock.now_ms()) == {tp: 0}

    clock.advance(MINUTE_MS)  # its log dir went offline: the last state, and the delay keeps growing
    assert tracker.update({}, {}, now_ms=clock.now_ms(), offline=[tp, never]) == {tp: MINUTE_MS, never: 0}
    clock.advance(MINUTE_MS)
    assert tracker.update({}, {}, now_ms=clock.now_ms(), offline=[tp]) == {tp: 2 * MINUTE_MS}

    assert tracker.update({}, {}, now_ms=clock.now_ms()) == {}  # in neither: forgotten
    clock.advance(MINUTE_MS)
    assert tracker.update({}, {}, now_ms=clock.now_ms(), offline=[tp]) == {tp: 0}
    assert tracker.update({tp: log}, {}, now_ms=clock.now_ms()) == {tp: 0}  # back: first found now


def test_a_log_whose_range_cannot_be_read_keeps_its_last_delay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(START_MS)
    written = compacted_log(tmp_path, clock)
    append(written, 5, clock.now_ms() - 3 * HOUR_MS)
    written.close()
    log = compacted_log(tmp_path, clock, min_cleanable_dirty_ratio=0.1)  # reopened: timestamps not yet read
    tp = log.topic_partition
    tracker = CompactionDelayTracker()
    assert tracker.update({tp: log}, {}, now_ms=clock.now_ms()) == {tp: 0}
    clock.advance(MINUTE_MS)
    log.config = replace(log.config, max_compaction_lag_ms=HOUR_MS)  # read, it would count from 2 h ago
    log.segments[0].log_path.unlink()  # its oldest segment's file gone from under it

    with caplog.at_level(logging.WARNING, logger="service.core.compaction_delay"):
        assert tracker.update({tp: log}, {}, now_ms=clock.now_ms()) == {tp: MINUTE_MS}
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        f"Cannot read the cleanable range of {tp} for the metrics"
    ]


def test_checkpoints_come_from_each_log_dirs_file_an_unreadable_one_counting_as_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(START_MS)
    readable = new_partition_log(tmp_path / "a" / "profiles-0", clock, policy="compact")
    unreadable = new_partition_log(tmp_path / "b" / "profiles-1", clock, policy="compact")
    OffsetCheckpointFile(tmp_path / "a" / CLEANER_OFFSET_CHECKPOINT).write({readable.topic_partition: 7})
    (tmp_path / "b" / CLEANER_OFFSET_CHECKPOINT).write_bytes(b"0\n1\nnot an entry\n")

    with caplog.at_level(logging.WARNING, logger="service.core.compaction_delay"):
        assert read_cleaner_checkpoints([readable, unreadable]) == {readable.topic_partition: 7}

    [warning] = caplog.records
    assert str(tmp_path / "b") in warning.getMessage()

"""``cleanable``: Kafka's ``LogToClean`` verdict (the ratio strictly above the minimum, or
``max.compaction.lag.ms`` overdue, and never without cleanable bytes), the bounds of
``LogCleanerManager.cleanableOffsets`` that ``test_explain`` does not reach through the document (the
high watermark, the tie order), ``maxCompactionDelay`` over segments without timestamps, and
``cleaner_checkpoints``: each log's entry from its own dir's file, an unreadable file reported or raised.
(The ratio and range cases the ``explain`` document shows are in ``test_explain``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from service.base.clock import ManualClock
from service.base.errors import CorruptDataError
from service.core.cleanable import (
    CleanerReason,
    LogToClean,
    UncleanableBound,
    cleanable_range,
    cleaner_checkpoints,
    log_to_clean,
)
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_files import CLEANER_OFFSET_CHECKPOINT
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.retention_helpers import START_MS, bases, log_config, new_partition_log

HOUR_MS = 3_600_000


def candidate(clean: int, cleanable: int, delay_ms: int = 0) -> LogToClean:
    return LogToClean(0, 0, clean, cleanable, delay_ms)


@pytest.mark.parametrize(
    ("clean", "cleanable", "delay_ms", "expected"),
    [
        (50, 50, 0, (False, CleanerReason.DIRTY_RATIO_AT_OR_BELOW_THRESHOLD)),  # 0.5 is not above 0.5
        (49, 51, 0, (True, CleanerReason.DIRTY_RATIO_ABOVE_THRESHOLD)),
        (90, 10, 0, (False, CleanerReason.DIRTY_RATIO_AT_OR_BELOW_THRESHOLD)),
        (90, 10, 1, (True, CleanerReason.MAX_COMPACTION_LAG_EXCEEDED)),  # overdue: whatever the ratio
        (100, 0, 5, (False, CleanerReason.NO_CLEANABLE_BYTES)),  # overdue, but nothing to clean
        (0, 0, 0, (False, CleanerReason.NO_CLEANABLE_BYTES)),
    ],
)
def test_the_verdict_is_kafkas(clean: int, cleanable: int, delay_ms: int, expected: tuple[bool, str]) -> None:
    assert candidate(clean, cleanable, delay_ms).verdict(0.5) == expected


def test_the_ratio_is_cleanable_over_total_bytes() -> None:
    assert candidate(30, 10).cleanable_ratio == 0.25
    assert candidate(0, 0).cleanable_ratio == 0.0
    assert candidate(30, 10).total_bytes == 40


def five_segments(
    directory: Path, clock: ManualClock, timestamp: int = START_MS, **config: Any
) -> PartitionLog:
    """Five segments of five 70-byte keyed batches, the last one active."""
    log = new_partition_log(directory, clock, policy="compact", segment_bytes=350, **config)
    for i in range(25):
        log.append_records([Record(0, timestamp, b"%d" % (i % 3), b"v")])
    assert bases(log) == [0, 5, 10, 15, 20]
    return log


def test_a_high_watermark_below_the_active_segment_bounds_the_range(tmp_path: Path) -> None:
    """A replicated log's unacknowledged records are not cleaned (Kafka bounds by the last stable
    offset, which is at most the high watermark); rounded down to its segment for the byte count."""
    clock = ManualClock(START_MS)
    log = five_segments(tmp_path / "t-0", clock)
    log.close()
    reloaded = load_partition_log(
        tmp_path / "t-0", log_config(policy="compact", segment_bytes=350), clock=clock, high_watermark=12
    ).log
    offsets = cleanable_range(reloaded, None, START_MS)
    assert (offsets.first_uncleanable_offset, offsets.bounded_by) == (
        12,
        UncleanableBound.ABOVE_HIGH_WATERMARK,
    )
    candidate = log_to_clean(reloaded, None, START_MS)
    assert candidate.first_uncleanable_offset == 10
    assert (candidate.clean_bytes, candidate.cleanable_bytes) == (0, 2 * 350)


def test_equal_bounds_name_the_active_segment(tmp_path: Path) -> None:
    """The high watermark is the log end offset here, and the active segment is empty: both bounds are
    offset 25; the first listed (the active segment) is named."""
    clock = ManualClock(START_MS)
    log = five_segments(tmp_path / "t-0", clock)
    log.roll()
    offsets = cleanable_range(log, None, START_MS)
    assert (offsets.first_uncleanable_offset, offsets.bounded_by) == (25, UncleanableBound.ACTIVE_SEGMENT)


def test_the_range_never_ends_before_it_starts(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    log = five_segments(tmp_path / "t-0", clock)
    offsets = cleanable_range(log, 22, START_MS)  # a checkpoint inside the active segment
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_offset) == (22, 22)
    assert log_to_clean(log, 22, START_MS).cleanable_bytes == 0


def test_max_compaction_delay_is_how_overdue_the_earliest_dirty_batch_is(tmp_path: Path) -> None:
    """Kafka's ``maxCompactionDelay``: now - max.compaction.lag.ms - the earliest first-batch timestamp of
    the dirty sealed segments, when positive."""
    clock = ManualClock(START_MS)
    log = five_segments(tmp_path / "t-0", clock, max_compaction_lag_ms=HOUR_MS)
    assert log_to_clean(log, None, START_MS + HOUR_MS).max_compaction_delay_ms == 0, "due, not overdue"
    assert log_to_clean(log, None, START_MS + HOUR_MS + 7).max_compaction_delay_ms == 7
    assert log_to_clean(log, 10, START_MS + HOUR_MS + 7).max_compaction_delay_ms == 7


def test_segments_without_timestamps_are_never_overdue(tmp_path: Path) -> None:
    """Kafka filters first-batch timestamps to those > 0: records without a timestamp do not make a
    log overdue, however old the segment."""
    clock = ManualClock(START_MS)
    log = five_segments(tmp_path / "t-0", clock, timestamp=-1, max_compaction_lag_ms=1)
    assert log_to_clean(log, None, START_MS + 10 * HOUR_MS).max_compaction_delay_ms == 0


def test_cleaner_checkpoints_come_from_each_logs_own_dir(tmp_path: Path) -> None:
    """A partition in two dirs (a future replica moving) has an entry in each dir's file: each log gets
    its own dir's, never the other's; a partition missing from its file has none."""
    clock = ManualClock(START_MS)
    a = new_partition_log(tmp_path / "dir-a" / "t-0", clock, policy="compact")
    b = new_partition_log(tmp_path / "dir-b" / "t-1", clock, policy="compact")
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    OffsetCheckpointFile(tmp_path / "dir-a" / CLEANER_OFFSET_CHECKPOINT).write({t0: 5, t1: 99})
    OffsetCheckpointFile(tmp_path / "dir-b" / CLEANER_OFFSET_CHECKPOINT).write({t0: 77})
    assert cleaner_checkpoints([a, b]) == {t0: 5}


def test_an_unreadable_checkpoint_is_raised_or_reported(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    log = new_partition_log(tmp_path / "dir-a" / "t-0", clock, policy="compact")
    (tmp_path / "dir-a" / CLEANER_OFFSET_CHECKPOINT).write_bytes(b"0\n1\nnot an entry\n")
    with pytest.raises(CorruptDataError):
        cleaner_checkpoints([log])
    reported: list[tuple[Path, Exception]] = []
    assert cleaner_checkpoints([log], on_unreadable=lambda path, exc: reported.append((path, exc))) == {}
    assert [path for path, _ in reported] == [tmp_path / "dir-a"]
    assert isinstance(reported[0][1], CorruptDataError)

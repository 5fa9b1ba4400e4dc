"""``compaction_estimate``: the summary's in-memory sketches of sealed segments (filled a budget of bytes
at a time, oldest first; a segment that cannot be read is skipped; a sketch from the sketch file adopted
only if it is of the segment as it is now; forgotten when the segment leaves every log) and the estimate
of a round, none until every segment it reads is sketched, and which segments those are."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.core.compaction_estimate import SegmentSketches, round_segments
from service.core.held_bytes import partition_bytes
from service.core.key_sketch import KeySketch, SegmentSketch, estimate_freed_bytes, sketch_segment
from service.storage.log import PartitionLog
from service.storage.records import Record
from tests.service.retention_helpers import START_MS, bases, new_partition_log


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    """Five 350-byte segments of five 70-byte keyed batches (three keys), the last one active."""
    log = new_partition_log(tmp_path / "t-0", ManualClock(START_MS), policy="compact", segment_bytes=350)
    for i in range(25):
        log.append_records([Record(0, START_MS, b"%d" % (i % 3), b"%d" % (i % 10))])
    assert bases(log) == [0, 5, 10, 15, 20]
    return log


def test_round_segments_are_the_sealed_ones_below_the_first_uncleanable_offset(log: PartitionLog) -> None:
    part = partition_bytes(log, now_ms=START_MS, cleaner_enabled=True, checkpoint=10)
    assert part.cleanable is not None
    assert [s.base_offset for s in round_segments(log, part)] == [0, 5, 10, 15], "the clean section too"
    held = partition_bytes(log, now_ms=START_MS, cleaner_enabled=False, checkpoint=None)
    assert held.cleanable is None and round_segments(log, held) == []


def test_fill_reads_up_to_the_budget_oldest_first(log: PartitionLog) -> None:
    """The budget is checked before each segment: the one that crosses it is still read whole."""
    sketches = SegmentSketches()
    sealed = log.segments[:-1]
    assert sketches.fill(sealed, budget_bytes=400) == 700
    assert [sketches.get(s) is not None for s in sealed] == [True, True, False, False]
    assert sketches.fill(sealed, budget_bytes=10_000) == 700, "the sketched ones are not read again"
    assert len(sketches) == 4
    assert sketches.fill(sealed, budget_bytes=10_000) == 0


def test_a_segment_that_cannot_be_read_is_skipped(log: PartitionLog) -> None:
    sketches = SegmentSketches()
    first, second = log.segments[0], log.segments[1]
    first.log_path.unlink()
    assert sketches.fill([first, second], budget_bytes=10_000) == second.size_bytes
    assert sketches.get(first) is None and sketches.get(second) is not None


def test_the_estimate_waits_for_every_sketch(log: PartitionLog) -> None:
    sketches = SegmentSketches()
    run = log.segments[:-1]
    sketches.fill(run[:3], budget_bytes=10_000)
    assert sketches.estimate(run) is None
    sketches.fill(run, budget_bytes=10_000)
    expected = estimate_freed_bytes(sketch_segment(s) for s in run)
    assert sketches.estimate(run) == expected
    assert expected == 4 * 350 - 3 * 70, "one batch a record: exact, three keys survive"


def test_adopt_takes_a_sketch_only_of_the_segment_as_it_is(log: PartitionLog) -> None:
    """The sketch file's entry of a segment since cleaned or truncated has another size: not adopted."""
    sketches = SegmentSketches()
    segment = log.segments[0]
    stale = SegmentSketch(segment.size_bytes - 70, 4, 4, KeySketch())
    sketches.adopt(segment, stale)
    assert sketches.get(segment) is None
    current = sketch_segment(segment)
    sketches.adopt(segment, current)
    assert sketches.get(segment) == current
    assert sketches.fill([segment], budget_bytes=10_000) == 0, "adopted: not read again"


def test_keep_only_forgets_segments_and_estimates_no_longer_in_a_log(log: PartitionLog) -> None:
    sketches = SegmentSketches()
    run = log.segments[:-1]
    sketches.fill(run, budget_bytes=10_000)
    assert sketches.estimate(run) is not None
    sketches.keep_only(run[1:])
    assert sketches.get(run[0]) is None and len(sketches) == 3
    assert sketches.estimate(run) is None, "the estimate of a run with a forgotten segment went with it"
    assert sketches.estimate(run[1:]) is not None

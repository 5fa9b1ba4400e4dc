"""``plan_round``, without Spark: what a parallel round decides on the driver before any record is read, as
``Cleaner.clean`` decides it. The upper bound is rounded down to a segment base and is the end offset; the
groups hold every segment below it but the active one, once each, in order, none over ``segment.bytes``; a
round whose bound rounds below its first dirty offset is None; the aborted transactions of a group's
segments come with it, and a producer with an open transaction is among the active ones. (Rounds planned and
run, against the in-process cleaner, are ``test_engine_oracle.py``'s.)"""

from __future__ import annotations

from pathlib import Path

from cleaner.spark.round_plan import plan_round
from service.base.clock import ManualClock
from service.storage.log import PartitionLog
from tests.cleaner.helpers import Producer, keyed, new_log

NOW_MS = 1_700_000_000_000


def write_keys(log: PartitionLog, count: int) -> None:
    for n in range(count):
        log.append_records([keyed(n % 7, n)])


def test_the_bound_is_rounded_to_a_segment_base_and_the_groups_cover_what_lies_below(tmp_path: Path) -> None:
    log = new_log(tmp_path / "t-0", ManualClock(NOW_MS))
    write_keys(log, 100)  # 70-byte batches in 1024-byte segments: several segments
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 5

    plan = plan_round(log, 0, bases[4] + 3, NOW_MS)  # inside the fifth segment

    assert plan is not None
    assert (plan.first_dirty_offset, plan.upper_bound, plan.end_offset) == (0, bases[4], bases[4])
    assert plan.map_latest_offset == bases[4] - 1 and plan.has_dirty_segments and plan.now_ms == NOW_MS
    grouped = [s.base_offset for group in plan.groups for s in group.segments]
    assert grouped == bases[:4]  # every segment below the bound, once, in order
    assert all(sum(s.size_bytes for s in group.segments) <= 1024 for group in plan.groups)
    assert plan.groups[0].base_offset == 0


def test_a_bound_below_the_first_dirty_offset_plans_nothing(tmp_path: Path) -> None:
    log = new_log(tmp_path / "t-0", ManualClock(NOW_MS))
    write_keys(log, 60)
    bases = [s.base_offset for s in log.segments]

    assert plan_round(log, bases[2] + 1, bases[2] + 2, NOW_MS) is None  # rounds down to bases[2]


def test_aborted_transactions_go_with_their_group_and_open_ones_are_active(tmp_path: Path) -> None:
    log = new_log(tmp_path / "t-0", ManualClock(NOW_MS))
    aborted, open_one = Producer(log, producer_id=7), Producer(log, producer_id=8)
    aborted.send(1, 2)
    aborted.abort()
    write_keys(log, 40)
    open_one.send(3)
    write_keys(log, 20)

    plan = plan_round(log, 0, log.active_segment.base_offset, NOW_MS)

    assert plan is not None
    lists = [txn for group in plan.groups for per_segment in group.aborted_txns for txn in per_segment]
    assert [txn.producer_id for txn in lists] == [7]
    assert 8 in plan.active_producers

"""``jobs``, the driver's side of a Spark job, without Spark: a job's rows by group slot (``rows_by_slot``: a
group two tasks rewrote is never swapped); how many rewrite ranges each log is cut into (one each, then one
more for the log with the most bytes a range while the job has fewer than the cores and ranges stay above
the minimum); which log the tasks share at the end; and how many key classes a log is mapped in."""

from __future__ import annotations

import pytest

from cleaner.native import puts_pipelined
from cleaner.spark.jobs import MAX_KEY_CLASSES, key_classes, ranges_per_log, rows_by_slot, shared_log
from cleaner.spark.rewrite import _COUNTERS


def row(slot: int, partition: int) -> dict[str, object]:
    fields = (
        *("slot", "base_offset", "lookup_keys", "task_partition", "started_ms", "ended_ms", "lookup_ms"),
        "spill_classes",
    )
    values: dict[str, object] = {name: 0 for name in (*fields, *_COUNTERS)}
    values.update(slot=slot, base_offset=slot * 10, task_partition=partition, is_rewritten=True)
    return values


def test_rows_are_keyed_by_slot_and_a_group_rewritten_twice_is_refused() -> None:
    by_slot = rows_by_slot([row(0, 0), row(1, 1)], "t-0")
    assert sorted(by_slot) == [0, 1] and by_slot[1].task_partition == 1
    with pytest.raises(RuntimeError, match="t-0: two Spark tasks rewrote one group"):
        rows_by_slot([row(0, 0), row(1, 1), row(1, 0)], "t-0")


@pytest.mark.parametrize(
    ("sizes", "cores", "min_range_bytes", "expected"),
    [
        ([1000], 4, 100, [4]),  # one large log: about one range a core
        ([1000], 4, 300, [3]),  # ... while its ranges stay at least the minimum
        ([1000], 4, 2000, [1]),
        ([900, 100], 4, 100, [3, 1]),  # the spare cores go to the log with the most bytes a range
        ([100] * 6, 4, 10, [1] * 6),  # more logs than cores: one range each
        ([], 4, 10, []),
    ],
)
def test_ranges_per_log(sizes: list[int], cores: int, min_range_bytes: int, expected: list[int]) -> None:
    assert ranges_per_log(sizes, cores, min_range_bytes) == expected


def test_the_shared_log_is_the_smallest_of_more_logs_than_cores_unless_it_has_one_group() -> None:
    assert shared_log([500, 100, 300], [4, 3, 2], cores=2) == 1
    assert shared_log([500, 100, 300], [4, 1, 2], cores=2) is None  # one group: nothing to share
    assert shared_log([500, 100], [4, 3], cores=2) is None  # no more logs than cores
    assert shared_log([500, 100, 300], [4, 3, 2], cores=1) is None


def test_key_classes_take_one_or_two_ranges_each_up_to_the_maximum() -> None:
    per_class = 2 if puts_pipelined() else 1
    assert key_classes(1) == 1
    assert key_classes(2 * per_class) == 2
    assert key_classes(1000) == MAX_KEY_CLASSES

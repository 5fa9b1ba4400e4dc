"""A job's rows by group slot (``jobs.rows_by_slot``): a group two tasks rewrote is never swapped."""

from __future__ import annotations

import pytest

from cleaner.spark.jobs import rows_by_slot
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

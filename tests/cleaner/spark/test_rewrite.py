"""A log's groups cut into rewrite ranges: by weight, every group once, in order; the cost of a group that
keeps more of its records weighs more."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cleaner.spark.rewrite import KEPT_COST, balanced_ranges, rewrite_costs


@given(
    weights=st.lists(st.floats(0, 1e9, allow_nan=False), min_size=1, max_size=40),
    count=st.integers(1, 12),
)
def test_every_group_is_in_one_range_in_offset_order(weights: list[float], count: int) -> None:
    slots = list(range(100, 100 + len(weights)))
    ranges = balanced_ranges(weights, slots, count)
    assert [slot for run in ranges for slot in run] == slots
    assert all(ranges) and len(ranges) <= count


def test_ranges_of_equal_weight_and_costs_from_what_each_group_keeps() -> None:
    assert balanced_ranges([1, 1, 1, 1, 1, 1], list(range(6)), 3) == [(0, 1), (2, 3), (4, 5)]
    assert balanced_ranges([1, 1, 1, 1, 4], list(range(5)), 2) == [(0, 1, 2, 3), (4,)]
    # three groups of 100 offsets: the first all superseded, the second half, the third none
    costs = rewrite_costs([0, 100, 200], [100, 200, 300], [1000, 1000, 500], [(0, 100), (100, 50)])
    assert costs == [1000.0, 1000 * (1 + KEPT_COST / 2), 500 * (1 + KEPT_COST)]

"""``index_points`` gives a run of appended batches exactly the index entries and state that the rule
applied batch by batch gives (the loop below, as ``LogSegment.append_batches`` ran it before)."""

from __future__ import annotations

import array

from hypothesis import given
from hypothesis import strategies as st

from service.storage.index_points import Entry, IndexPoints, index_points


def batch_by_batch(
    state: IndexPoints, sizes: list[int], last_offsets: list[int], timestamps: list[int], interval: int
) -> list[Entry]:
    entries = []
    for size, last_offset, timestamp in zip(sizes, last_offsets, timestamps, strict=True):
        if not size:
            continue
        if timestamp > state.max_timestamp:
            state.max_timestamp, state.offset_of_max = timestamp, last_offset
        if state.since_entry > interval:
            entries.append(Entry(last_offset, state.position, state.max_timestamp, state.offset_of_max))
            state.since_entry = 0
        state.since_entry += size
        state.position += size
    return entries


runs = st.lists(st.tuples(st.sampled_from([0, 1, 61, 70, 300, 4096, 5000]), st.integers(-1, 40)), max_size=60)


@given(
    run=runs,
    position=st.integers(0, 10_000),
    since_entry=st.integers(0, 6_000),
    max_timestamp=st.integers(-1, 40),
    interval=st.sampled_from([0, 1, 100, 4096]),
)
def test_the_entries_and_state_are_the_batch_by_batch_rule_s(
    run: list[tuple[int, int]], position: int, since_entry: int, max_timestamp: int, interval: int
) -> None:
    sizes = [size for size, _ in run]
    last_offsets = list(range(100, 100 + 2 * len(run), 2))
    timestamps = [timestamp for _, timestamp in run]
    expected_state = IndexPoints(position, since_entry, max_timestamp, 7)
    expected = batch_by_batch(expected_state, sizes, last_offsets, timestamps, interval)
    state = IndexPoints(position, since_entry, max_timestamp, 7)
    assert index_points(state, sizes, last_offsets, timestamps, interval) == expected
    assert state == expected_state


def test_strided_int64_views_as_the_cleaner_passes_them() -> None:
    """The cleaner hands its metadata rows' columns as strided memoryviews of int64."""
    rows = array.array("q", [s for row in [(300, 1, 5), (0, 2, 99), (5000, 3, 7), (70, 4, 8)] for s in row])
    view = memoryview(rows)
    state = IndexPoints(0, 0, -1, -1)
    entries = index_points(state, view[0::3], view[1::3], view[2::3], 4096)
    assert entries == [Entry(4, 5300, 8, 4)]  # the empty second batch is none: no entry, no timestamp
    assert state == IndexPoints(5370, 70, 8, 4)

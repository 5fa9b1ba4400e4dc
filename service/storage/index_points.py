"""The index entries a run of batches appended in one write gets (``LogSegment.append_batches``).

Appended one at a time, a batch gets an offset and a time index entry when more than
``index.interval.bytes`` were appended since the last entry, and moves the segment's largest timestamp
(and the offset it is at) when it carries a larger one. For a run of thousands of small batches (a cleaned
run of 10-record batches) a Python step per batch cost a tenth of a round, so the run is walked by its
accumulated positions and running maxima (``itertools.accumulate``, C loops) and ``bisect``: one Python step
per index entry, not per batch, with exactly the entries and state the batch-by-batch rule gives.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, compress
from typing import NamedTuple

__all__ = ["Entry", "IndexPoints", "index_points"]


@dataclass(slots=True)
class IndexPoints:
    """A segment's index state before a run: where it ends, bytes since its last entry, its largest
    timestamp and the offset of that timestamp."""

    position: int
    since_entry: int
    max_timestamp: int
    offset_of_max: int


class Entry(NamedTuple):
    offset: int  # the batch's last offset
    position: int  # where the batch starts
    max_timestamp: int  # the segment's largest timestamp, this batch's included
    offset_of_max: int


def index_points(
    state: IndexPoints,
    sizes: Sequence[int],
    last_offsets: Sequence[int],
    max_timestamps: Sequence[int],
    interval: int,
) -> list[Entry]:
    """The entries of the run (batch i: ``sizes[i]`` bytes, its last offset and max timestamp; a zero size
    is no batch), with ``state`` moved past it."""
    if 0 in sizes:  # the sizes select themselves: a zero one is falsy
        last_offsets = list(compress(last_offsets, sizes))
        max_timestamps = list(compress(max_timestamps, sizes))
        sizes = list(compress(sizes, sizes))
    starts = list(accumulate(sizes, initial=state.position))  # starts[i]: where batch i goes; [-1]: the end
    maxima = list(accumulate(max_timestamps, max, initial=state.max_timestamp))  # [i + 1]: with batch i

    def offset_of(maximum: int) -> int:
        """The offset of the first batch that reached ``maximum`` (the state's, if none of the run's did)."""
        first = bisect_left(maxima, maximum)
        return state.offset_of_max if first == 0 else last_offsets[first - 1]

    entries = []
    threshold = state.position + interval - state.since_entry  # an entry for the first batch past it
    last_entry_start = None
    while (i := bisect_right(starts, threshold, 0, len(sizes))) < len(sizes):
        maximum = maxima[i + 1]
        entries.append(Entry(last_offsets[i], starts[i], maximum, offset_of(maximum)))
        last_entry_start = starts[i]
        threshold = starts[i] + interval
    end = starts[-1]
    if last_entry_start is None:
        state.since_entry += end - state.position
    else:
        state.since_entry = end - last_entry_start
    state.position = end
    if maxima[-1] != state.max_timestamp:
        state.max_timestamp, state.offset_of_max = maxima[-1], offset_of(maxima[-1])
    return entries

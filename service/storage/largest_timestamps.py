"""The largest timestamps of many sealed segments in one C call, with the GIL released.

A sealed segment's largest timestamp is its time index's last entry, read on first use: one open, two
reads and a close in Python per segment. The daemon's first summary asks it of every sealed segment
under time retention, at 10,000 partitions tens of thousands of files. ``read_largest_timestamps`` reads
their edges in ``_dirscan.read_time_index_edges`` (as an inspection's prescan reads them) and primes each
segment with them, so that the Python work per segment is a check of 24 bytes, and the reads hold no
GIL (the API's threads run meanwhile).

Only sealed segments are primed: their time index no longer changes (the active segment's grows with each
append). What was read is checked as the segment checks a scan's edges (``LogSegment._load_max_timestamp``),
and a file that could not be read whole is left for the segment to read and judge itself.
"""

from __future__ import annotations

from collections.abc import Iterable

from service.storage.native_module import load_native_module
from service.storage.segment import LogSegment

__all__ = ["read_largest_timestamps"]


_dirscan = load_native_module("service.storage._dirscan")


def read_largest_timestamps(sealed: Iterable[LogSegment]) -> int:
    """Prime ``sealed`` segments (none of them active) whose largest timestamp is unread with their time
    indexes' edges, read in C; returns how many were primed (0 without the C module)."""
    if _dirscan is None:
        return 0
    wanted = [(segment, file) for segment in sealed if (file := segment.time_index_edges_wanted())]
    if not wanted:
        return 0
    primed = 0
    found = _dirscan.read_time_index_edges([file for _, file in wanted])
    for (segment, _file), item in zip(wanted, found, strict=True):
        if item is not None and item[1] is not None:
            segment.prime_time_index_edges(item[0], item[1])
            primed += 1
    return primed

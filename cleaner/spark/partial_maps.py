"""The round's key map without an aggregation: partial maps built in C by map tasks, merged by rewrite tasks.

Map tasks and rewrite tasks are the two stages of one Spark job. A map task takes one or more consecutive
splits of a log's dirty segments (``segment_splits``: a segment, or a byte range of one cut at a batch
start; small ones packed together, so many small logs do not make many tiny tasks) and maps them as
``build_offset_map`` maps the dirty section. Mappable records are the data records (not control) at or
above the first dirty offset outside aborted transactions; which data batches are aborted the driver
already knows from its header replay (``MapScan.aborted_batches``), so a split needs no transaction state
of its own. Runs of plain batches go through ``KeyMap.map_batches`` (header, CRC, records in one C call per
read chunk), any other batch through ``map_data_batch`` (its records area in C when it can, else the Python
rules, which stay the oracle). The task's partial map leaves it as one blob (``dump_key_map``: per entry
the key's length, its offset, the key bytes): no Python object per record or key. The job's one exchange
moves whole blobs, keyed by the partition of each group that needs them; nothing is aggregated by key.

One log's map tasks come in offset order (segment, then position), and every offset of a task lies above
every offset of an earlier one, so putting the blobs into one map in task order (a later put wins) gives
each key its latest offset: the map ``build_offset_map`` builds. A group's task gets and loads only the
blobs of tasks that reach its first segment or beyond: a key whose latest record lies before the group
cannot supersede a record of the group (the rules drop a record only when its offset is below the key's
latest; the map is used for nothing else), so leaving those out, or not, changes no verdict. The log's
first group loads every blob: its map size is the round's ``map_size``.

Without the C module (``LOGCLEANER_PURE_PYTHON=1``) the same blobs are written and read by ``struct``.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from cleaner.native import dump_key_map, load_key_map, new_native_key_map
from cleaner.offset_map import OffsetMap, map_data_batch
from cleaner.segment_chunks import RUN_BYTES, SegmentChunks
from cleaner.spark.segment_splits import SegmentSplit
from cleaner.stats import CleanerStats

__all__ = ["MapSplit", "build_partial_map", "map_tasks", "merged_lookup", "pack_consecutive", "run_map_task"]

T = TypeVar("T")

_ENTRY = struct.Struct("<Iq")  # key length, offset; then the key bytes (cleaner/_native.c's blob form)


@dataclass(frozen=True, slots=True)
class MapSplit:
    """One map task: consecutive splits of one log's dirty segments, the first dirty offset, the aborted
    data batches in them (base offsets); ``log`` and ``index`` say whose task it is and where its blob goes
    in its log's order, ``destinations`` which rewrite tasks get its blob."""

    log: int
    index: int
    splits: tuple[SegmentSplit, ...]
    start_offset: int
    aborted_batches: frozenset[int]
    destinations: tuple[int, ...] = ()  # the rewrite partitions (groups) that need this task's map


def build_partial_map(task: MapSplit) -> bytes:
    """The task's keys → their latest offset in its splits, as one blob (runs on an executor)."""
    offset_map = OffsetMap()  # the C table, unless LOGCLEANER_PURE_PYTHON=1
    native = offset_map.native
    stats = CleanerStats()  # the driver's header replay already counted the map pass
    start, aborted = task.start_offset, task.aborted_batches
    for split in task.splits:
        with SegmentChunks.of_range(split.log_path, split.start_position, split.end_position) as chunks:
            while chunks.has_more:
                buf, at = chunks.chunk()
                if native is not None:
                    reached, batches, *_counts = native.map_batches(buf, at, at + RUN_BYTES, start)
                    if batches:
                        chunks.position = chunks.buffer_start + reached
                        continue
                batch = chunks.batch_here()  # the batch C left (or every batch): Python's, errors included
                if not batch.is_control and batch.base_offset not in aborted:
                    map_data_batch(batch, start, offset_map, stats)
                chunks.position += batch.size_bytes
    if native is not None:
        return dump_key_map(native)
    return _dump_entries(offset_map)


def merged_lookup(blobs: Sequence[bytes]) -> tuple[Callable[[bytes], int], int]:
    """The lookup over ``blobs`` put in order (a later blob wins), and its number of keys."""
    native = new_native_key_map()
    if native is not None:
        for blob in blobs:
            load_key_map(native, blob)
        return native.get, len(native)
    entries: dict[bytes, int] = {}
    for blob in blobs:
        entries.update(_entries_of(blob))
    return lambda key: entries.get(key, -1), len(entries)


def _dump_entries(offset_map: OffsetMap) -> bytes:
    parts = []
    for key, offset in offset_map.entries().items():
        parts.append(_ENTRY.pack(len(key), offset))
        parts.append(key)
    return b"".join(parts)


def _entries_of(blob: bytes) -> dict[bytes, int]:
    entries = {}
    at = 0
    while at < len(blob):
        if len(blob) - at < _ENTRY.size:
            raise ValueError("not a key map blob: an entry runs past its end")
        length, offset = _ENTRY.unpack_from(blob, at)
        at += _ENTRY.size
        if length > len(blob) - at:
            raise ValueError("not a key map blob: an entry runs past its end")
        entries[blob[at : at + length]] = offset
        at += length
    return entries


def run_map_task(task: MapSplit) -> list[tuple[int, tuple[int, bytes]]]:
    """A map task's output: its blob for each destination, as (partition, (split index, blob))."""
    blob = build_partial_map(task)
    return [(partition, (task.index, blob)) for partition in task.destinations]


def map_tasks(
    log: int,
    splits: Sequence[SegmentSplit],
    start_offset: int,
    aborted: Sequence[int],
    groups: Sequence[tuple[int, int]],
    task_bytes: int,
) -> list[MapSplit]:
    """One log's map tasks, in split order: consecutive splits packed up to ``task_bytes`` a task (a split
    larger than that alone). A task's aborted batches are those of its segments' range, its destinations
    the partitions of ``groups`` ((base offset, partition) of each of the log's groups) based at or below
    its last segment: every group that needs one of its splits (a group also getting keys from splits
    before it is harmless, see the module docstring)."""
    ordered = sorted(aborted)
    bases = sorted({s.segment_base_offset for s in splits})
    tasks = []
    for index, run in enumerate(pack_consecutive(splits, _split_bytes, task_bytes)):
        first, last = run[0].segment_base_offset, run[-1].segment_base_offset
        at = bisect.bisect_right(bases, last)
        end = bases[at] if at < len(bases) else run[-1].until_offset
        lo, hi = bisect.bisect_left(ordered, first), bisect.bisect_left(ordered, end)
        destinations = tuple(partition for group_base, partition in groups if group_base <= last)
        tasks.append(MapSplit(log, index, run, start_offset, frozenset(ordered[lo:hi]), destinations))
    return tasks


def pack_consecutive(items: Sequence[T], size_of: Callable[[T], int], task_bytes: int) -> list[tuple[T, ...]]:
    """``items`` in order, cut into runs of up to ``task_bytes`` (an item larger than that alone): what one
    task takes, so that many small splits or groups do not become many tiny tasks."""
    runs: list[list[T]] = []
    size = 0
    for item in items:
        length = size_of(item)
        if not runs or size + length > task_bytes:
            runs.append([])
            size = 0
        runs[-1].append(item)
        size += length
    return [tuple(run) for run in runs]


def _split_bytes(split: SegmentSplit) -> int:
    return split.end_position - split.start_position

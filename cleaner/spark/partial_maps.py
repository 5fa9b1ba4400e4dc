"""The round's key map without an aggregation: partial maps built in C by map tasks, merged by rewrite tasks.

Map tasks and rewrite tasks are the two stages of one Spark job. A map task takes one split of a dirty
segment (``segment_splits``: a segment, or a byte range of one cut at a batch start) and maps it as
``build_offset_map`` maps the dirty section. Mappable records are the data records (not control) at or
above the first dirty offset outside aborted transactions; which data batches are aborted the driver
already knows from its header replay (``MapScan.aborted_batches``), so a split needs no transaction state
of its own. Runs of plain batches go through ``KeyMap.map_batches`` (header, CRC, records in one C call per
read chunk), any other batch through ``map_data_batch`` (its records area in C when it can, else the Python
rules, which stay the oracle). The task's partial map leaves it as one blob (``dump_key_map``: per entry
the key's length, its offset, the key bytes): no Python object per record or key. The job's one exchange
moves whole blobs, keyed by the partition of each group that needs them; nothing is aggregated by key.

One log's splits come in offset order (segment, then position), and every offset of a split lies above
every offset of an earlier one, so putting the blobs into one map in split order (a later put wins) gives
each key its latest offset: the map ``build_offset_map`` builds. A group's task gets and loads only the
splits at or after its first segment: a key whose latest record lies before the group cannot supersede a
record of the group (the rules drop a record only when its offset is below the key's latest; the map is
used for nothing else), so leaving those splits out changes no verdict. The log's first group loads every
split: its map size is the round's ``map_size``.

Without the C module (``LOGCLEANER_PURE_PYTHON=1``) the same blobs are written and read by ``struct``.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cleaner.native import dump_key_map, load_key_map, new_native_key_map
from cleaner.offset_map import CHUNK_BYTES, OffsetMap, map_data_batch
from cleaner.segment_chunks import SegmentChunks
from cleaner.spark.segment_splits import SegmentSplit
from cleaner.stats import CleanerStats

__all__ = ["MapSplit", "build_partial_map", "map_tasks", "merged_lookup", "run_map_task"]

_ENTRY = struct.Struct("<Iq")  # key length, offset; then the key bytes (cleaner/_native.c's blob form)


@dataclass(frozen=True, slots=True)
class MapSplit:
    """One map task: a byte range of a dirty segment, the first dirty offset, the aborted data batches in
    it (base offsets); ``log`` and ``index`` say whose split it is and where it goes in its log's order,
    ``destinations`` which rewrite tasks get its blob."""

    log: int
    index: int
    split: SegmentSplit
    start_offset: int
    aborted_batches: frozenset[int]
    destinations: tuple[int, ...] = ()  # the rewrite partitions (groups) that need this split's map


def build_partial_map(task: MapSplit) -> bytes:
    """The split's keys → their latest offset in it, as one blob (runs on an executor)."""
    offset_map = OffsetMap()  # the C table, unless LOGCLEANER_PURE_PYTHON=1
    native = offset_map.native
    stats = CleanerStats()  # the driver's header replay already counted the map pass
    split, start, aborted = task.split, task.start_offset, task.aborted_batches
    with SegmentChunks.of_range(split.log_path, split.start_position, split.end_position) as chunks:
        while chunks.has_more:
            buf, at = chunks.chunk()
            if native is not None:
                reached, batches, *_counts = native.map_batches(buf, at, at + CHUNK_BYTES, start)
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
) -> list[MapSplit]:
    """One log's map tasks, in split order; each split's aborted batches are those of its segment range,
    its destinations the partitions of ``groups`` ((base offset, partition) of each of the log's groups)
    based at or below its segment."""
    ordered = sorted(aborted)
    bases = sorted({s.segment_base_offset for s in splits})
    tasks = []
    for index, split in enumerate(splits):
        base = split.segment_base_offset
        at = bisect.bisect_right(bases, base)
        end = bases[at] if at < len(bases) else split.until_offset
        lo, hi = bisect.bisect_left(ordered, base), bisect.bisect_left(ordered, end)
        destinations = tuple(partition for group_base, partition in groups if group_base <= base)
        tasks.append(MapSplit(log, index, split, start_offset, frozenset(ordered[lo:hi]), destinations))
    return tasks

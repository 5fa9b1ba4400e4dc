"""Where the ``kafka-log`` data source's input partitions come from: segments, cut at offset-index entries.

A path is a partition dir (it holds ``.log`` files) or a log dir (every live ``<topic>-<partition>`` dir in
it; ``-delete``/``-future``/``-stray`` dirs are skipped). Only finished names count: ``.cleaned``,
``.swap`` and ``.deleted`` files are a cleaning or a deletion in flight and are never read.

A segment is one split, or several when it is larger than ``max_split_bytes``: cuts fall on positions from
its ``.index``, which are batch starts, so a split never begins inside a batch. ``from_offset`` starts the
first overlapping segment at its index entry for that offset (Kafka's fetch does the same); segments
wholly outside [from_offset, until_offset) are not read at all. The index is read (on the planning side
only) just for a segment that holds ``from_offset`` past its base or is larger than ``max_split_bytes``.
A damaged index (a crash can leave zero-filled slots) only makes splits coarser: entries are used while
they increase and stay inside the ``.log``.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path

from service.base.errors import InvalidInputError, NotFoundError
from service.storage.index_file import read_whole_file
from service.storage.log_config import LONG_MAX
from service.storage.log_files import INDEX_SUFFIX, LOG_SUFFIX, parse_partition_dir_name, segment_path
from service.storage.offset_index import ENTRY_SIZE, OffsetPosition, decode_entries

__all__ = ["DEFAULT_SPLIT_BYTES", "SegmentSplit", "plan_splits"]

DEFAULT_SPLIT_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class SegmentSplit:
    """A byte range [start_position, end_position) of one segment's ``.log``, and the offsets wanted."""

    topic: str
    partition: int
    log_path: str
    segment_base_offset: int
    start_position: int
    end_position: int
    from_offset: int
    until_offset: int  # exclusive


def plan_splits(
    path: Path | str,
    *,
    from_offset: int = 0,
    until_offset: int = LONG_MAX,
    max_split_bytes: int = DEFAULT_SPLIT_BYTES,
) -> list[SegmentSplit]:
    """Every split to read under ``path``, partitions in (topic, partition) order, segments by offset."""
    if max_split_bytes <= 0:
        raise InvalidInputError(f"maxSplitBytes must be > 0, got {max_split_bytes}")
    root = Path(path)
    if not root.is_dir():
        raise NotFoundError(f"{root}: not a directory (give a partition dir or a log dir)")
    splits: list[SegmentSplit] = []
    for directory, topic, partition in _partition_dirs(root):
        splits.extend(
            _partition_splits(directory, topic, partition, from_offset, until_offset, max_split_bytes)
        )
    return splits


def _partition_dirs(root: Path) -> list[tuple[Path, str, int]]:
    if any(name.endswith(LOG_SUFFIX) for name in os.listdir(root)):
        parsed = parse_partition_dir_name(root.name)
        return [(root, parsed.topic, parsed.partition)]
    found = []
    for child in root.iterdir():
        if not child.is_dir():
            continue
        try:
            parsed = parse_partition_dir_name(child.name)
        except InvalidInputError:
            continue  # checkpoint files' neighbours: not a partition
        if parsed.kind == "":
            found.append((child, parsed.topic, parsed.partition))
    return sorted(found, key=lambda item: (item[1], item[2]))


def _segment_bases(directory: Path) -> list[int]:
    bases = []
    for name in os.listdir(directory):
        stem, dot, suffix = name.partition(".")
        if dot and "." + suffix == LOG_SUFFIX and stem.isdigit():
            bases.append(int(stem))
    return sorted(bases)


def _partition_splits(
    directory: Path, topic: str, partition: int, from_offset: int, until_offset: int, max_split_bytes: int
) -> list[SegmentSplit]:
    bases = _segment_bases(directory)
    splits = []
    for i, base in enumerate(bases):
        next_base = bases[i + 1] if i + 1 < len(bases) else LONG_MAX
        if next_base <= from_offset or base >= until_offset:
            continue
        log_path = segment_path(directory, base, LOG_SUFFIX)
        try:
            size = os.stat(log_path).st_size
        except FileNotFoundError:
            continue  # removed by retention or a swap since the listing
        entries: list[OffsetPosition] = []
        if from_offset > base or size > max_split_bytes:  # else neither a start nor a cut can come of it
            entries = _index_entries(segment_path(directory, base, INDEX_SUFFIX), base, size)
        start = 0
        if from_offset > base:
            start = max((e.position for e in entries if e.offset <= from_offset), default=0)
        cuts = _cut_positions(entries, start, size, max_split_bytes)
        bounds = [start, *cuts, size]
        for lo, hi in itertools.pairwise(bounds):
            if hi > lo:
                splits.append(
                    SegmentSplit(topic, partition, str(log_path), base, lo, hi, from_offset, until_offset)
                )
    return splits


def _index_entries(index_path: Path, base: int, log_size: int) -> list[OffsetPosition]:
    """The index's entries while they increase and point inside the ``.log``; [] if it cannot be read."""
    try:
        data = read_whole_file(str(index_path))
    except OSError:
        return []
    usable = len(data) - len(data) % ENTRY_SIZE
    entries: list[OffsetPosition] = []
    for entry in decode_entries(data[:usable], base):
        if entries and (entry.offset <= entries[-1].offset or entry.position <= entries[-1].position):
            break
        if entry.position >= log_size:
            break
        entries.append(entry)
    return entries


def _cut_positions(entries: list[OffsetPosition], start: int, size: int, max_split_bytes: int) -> list[int]:
    """Batch-start positions after ``start`` where a split ends: at the first offset-index entry at or past
    ``max_split_bytes`` from the split's start, so every split but the last holds at least that many bytes
    and at most one index interval (``index.interval.bytes``) more."""
    cuts = []
    last = start
    for entry in entries:
        if entry.position - last >= max_split_bytes and size - entry.position > 0:
            cuts.append(entry.position)
            last = entry.position
    return cuts

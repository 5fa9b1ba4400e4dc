"""The round's key map without an aggregation: partial maps built in C, moved as files, used by tasks.

A log's groups are cut into consecutive ranges, one rewrite task each. A log of several ranges is mapped by
key hash: the map of class k of K (K = one per two ranges when a map's puts run on a thread of their own, so
that a class's map takes two cores, else one per range; at most four: ``jobs.key_classes``) takes every
split of the dirty section (``segment_splits``: a segment, or a byte range of one cut at a batch start) and
maps them as ``build_offset_map`` maps the dirty section, but takes only the keys of hash class k
(``set_key_class``; without C, ``key_class`` in Python): a table of about 1/K of the keys, and the superseded
bitmap of its keys' records over the whole dirty section. The classes partition the keys, so the K bitmaps
OR'd are the bitmap of one map of every key, and the K blobs together are that map's entries. Mappable records
are the data records (not control) at or above the first dirty offset outside aborted transactions; which data
batches are aborted the driver already knows from its header replay (``MapScan.aborted_batches``), so a split
needs no transaction state of its own. Runs of data batches go through ``KeyMap.map_batches`` (header, CRC,
records in one C call per read chunk; given the aborted batches' offsets, it reads those and every marker
without mapping them), any other batch through ``map_data_batch`` (its records area in C when it can, else the
Python rules, which stay the oracle). A task's scan of plain batches reads only their keys
(``skip_batch_checks``: no CRC): every batch it maps is read again, checked, by the rewrite task whose range
holds it, and a corrupt one fails that task, the job, and with it the round before anything is swapped in.

The classes are mapped by the log's rewrite tasks themselves (``ensure_class_files``), no job of their
own: a task takes each class's file lock in turn, starting at its own class, and maps the class if its
file is not complete yet; so with a core each, each task maps one class, and every task then finds the
others' files. A class's map leaves its task as one blob (``dump_key_map_to``: per entry the key's length,
its offset, the key bytes) and its bitmap, in a scratch file in the log's own dir: only paths go through
Spark, no Python object per record or key, and nothing is aggregated by key. The files are named
``<round end offset>.keymap-<class>.cleaned``: the loader deletes any ``.cleaned`` file left by a crash,
and no ``.swap`` of the round lies at or above that offset, so none is taken for an interrupted split.

A rewrite task's lookup (``range_lookup``) ORs every class's bitmap into a fresh C map and defers their
blobs (``defer_key_map``): the filter of the dirty section's plain batches reads "superseded" from the
bits, and only a lookup the bits cannot answer (a record below the first dirty offset, a batch the C
filter leaves to Python or reads without the bitmap) puts the blobs, once, into the table. The map size is
the classes' key counts added; the bitmaps' counts per bucket of offsets (``superseded_in``) tell how much
each group keeps, which orders the log's groups as its tasks take them (``task_files``). A log of one
range needs no file: its one task maps its dirty segments itself, in offset order, so the C map keeps its
superseded bitmap for the filter, exactly as in the in-process round.

A log whose dirty section could pass its thread's share of ``log.cleaner.dedupe.buffer.size``
(``KeyMapBudget.may_pass``, asked on the driver) is mapped by one task in one map of every key, bounded
by that share as the in-process round's is (``key_map_budget``): beyond it the map spills to disk, the
task probes the clean section (``clean_splits``) and replays the classes one at a time, so its bitmap
answers for every offset of the log (``_bounded_map``). Its file holds that bitmap and no blob (the
table is empty once replayed); each rewrite task takes the bitmap alone (``take_spilled_bits``) and
answers every lookup from it: no task of the round holds more than the share for its key map.

Without the C module (``LOGCLEANER_PURE_PYTHON=1``) the same blobs are written and read by ``struct`` (no
bitmap: every record is looked up in the classes' entries, merged).
"""

from __future__ import annotations

import array
import fcntl
import logging
import mmap
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from cleaner.compaction.key_map_budget import KeyMapBudget
from cleaner.compaction.offset_map import OffsetMap, map_data_batch
from cleaner.compaction.segment_chunks import RUN_BYTES, SegmentChunks
from cleaner.compaction.stats import CleanerStats
from cleaner.native import (
    FALLBACK,
    NativeKeyMap,
    defer_key_map,
    dump_key_map_to,
    dump_superseded_bits,
    finish_spill,
    is_spilling,
    key_class,
    or_superseded_bits,
    puts_on_own_thread,
    set_key_class,
    skip_batch_checks,
    spill_probe_records,
    take_spilled_bits,
)
from cleaner.spark.segment_splits import SegmentSplit
from cleaner.spark.task_files import TaskTicket, TicketRef
from service.storage.log_files import file_name

__all__ = [
    "MapSplit",
    "RangeLookup",
    "blob_path",
    "class_tasks",
    "ensure_class_files",
    "own_map",
    "range_lookup",
    "superseded_counts",
    "superseded_in",
    "write_partial_map",
]

logger = logging.getLogger(__name__)

_ENTRY = struct.Struct("<Iq")  # key length, offset; then the key bytes (cleaner/native/blob_io.c's blob form)
# A blob file: the blob's length, the bitmap's (0: none), the map's keys, the classes it spilled to (0:
# none; then no blob, and the bitmap answers alone); then the blob, the bitmap.
_FILE_HEADER = struct.Struct("<qqqq")
_WRITING = 1 << 62  # the blob size in a class file's header while its writer is still at it
_BITS_BASE = struct.Struct("<q")  # a bitmap (``dump_superseded_bits``): its first offset, its last, the words
_BITS_HEADER = 16
SUPERSEDED_BUCKET = 1 << 16  # offsets a count of ``superseded_counts`` covers


@dataclass(frozen=True, slots=True)
class MapSplit:
    """One map task: consecutive splits of one log's dirty segments, the first dirty offset, the aborted
    data batches in them (base offsets); ``log`` and ``index`` say whose task it is and where its blob goes
    in its log's order, ``blob_path`` the file its blob is written to (``write_partial_map``). With
    ``classes`` > 1 its map takes only the keys of hash class ``key_class`` (``class_tasks``). With a
    ``budget`` (one class), its map is bounded (``_bounded_map``): ``first_offset`` is the log's first
    segment's base, ``end_offset`` the round's end, ``clean_splits`` the segments below the first dirty
    offset, which a spilled map probes."""

    log: int
    index: int
    splits: tuple[SegmentSplit, ...]
    start_offset: int
    aborted_batches: frozenset[int]
    blob_path: str = ""
    key_class: int = 0
    classes: int = 1
    budget: KeyMapBudget | None = None
    first_offset: int = 0
    end_offset: int = 0
    clean_splits: tuple[SegmentSplit, ...] = ()


class RangeLookup(NamedTuple):
    """A rewrite task's lookup, its map's keys, and the classes that map spilled to (0: none)."""

    lookup: Callable[[bytes], int]
    keys: int
    spill_classes: int


class _KeyClassMap(OffsetMap):
    """An ``OffsetMap`` of one key class: the C map filters by itself (``set_key_class``); without C,
    ``put`` drops the other classes' keys."""

    __slots__ = ("_classes", "_key_class")

    def __init__(self, key_class_: int, classes: int) -> None:
        super().__init__()
        self._key_class, self._classes = key_class_, classes
        if self._native is not None:
            set_key_class(self._native, key_class_, classes)

    def put(self, key: bytes, offset: int) -> None:
        if self._native is not None or key_class(key, self._classes) == self._key_class:
            super().put(key, offset)


def _task_map(task: MapSplit) -> OffsetMap:
    """The map a task builds; its scans check no batch (``skip_batch_checks``): the round's rewrite tasks
    check every batch it maps, and the driver swaps nothing in unless they all succeeded."""
    offset_map = OffsetMap() if task.classes <= 1 else _KeyClassMap(task.key_class, task.classes)
    if offset_map.native is not None:
        skip_batch_checks(offset_map.native)
    return offset_map


def ensure_class_files(tasks: Sequence[MapSplit], first: int, ticket: TaskTicket) -> None:
    """Every key class's map file of one log complete (``tasks``: its classes, ``first``: where this task
    starts, so that the log's tasks start on different classes). A class's file is its own lock: a task
    takes it exclusively (waiting while another task maps that class), and maps the class only if the file
    is not complete yet. A task holds one such lock at a time and waits for nothing while it does, so
    every wait ends; with one core, the first task maps every class and the others find them done. Runs on
    an executor, inside the round's ``ticket``."""
    for k in range(len(tasks)):
        task = tasks[(first + k) % len(tasks)]
        fd = os.open(task.blob_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not _is_complete(fd):
                ticket.check()
                _write_class_file(task, fd)
        finally:
            os.close(fd)  # the lock goes with it


def _is_complete(fd: int) -> bool:
    size = os.fstat(fd).st_size
    if size < _FILE_HEADER.size:
        return False
    blob_bytes, bits_bytes, _keys, _spilled = _FILE_HEADER.unpack(os.pread(fd, _FILE_HEADER.size, 0))
    return bool(size == _FILE_HEADER.size + blob_bytes + bits_bytes)


def _write_class_file(task: MapSplit, fd: int) -> None:
    """Map ``task``'s class and write its file: blob, bitmap, then the header with their sizes (a writer
    that dies half way leaves the header that says it is writing: not complete)."""
    # one class per two ranges: the other task waits for it
    offset_map, spill_classes = _built_map(task, spare_core=True)
    native = offset_map.native
    os.ftruncate(fd, 0)
    _pwrite_all(fd, _FILE_HEADER.pack(_WRITING, 0, 0, 0), 0)  # a header no file's size matches: not complete
    if native is None:
        blob = _dump_entries(offset_map)
        _pwrite_all(fd, blob, _FILE_HEADER.size)
        blob_bytes = len(blob)
    else:
        blob_bytes = dump_key_map_to(native, fd, _FILE_HEADER.size)
    bits = (None if native is None else dump_superseded_bits(native)) or b""
    _pwrite_all(fd, bits, _FILE_HEADER.size + blob_bytes)
    _pwrite_all(fd, _FILE_HEADER.pack(blob_bytes, len(bits), offset_map.size, spill_classes), 0)


def _pwrite_all(fd: int, data: bytes, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view, position = view[written:], position + written


def write_partial_map(task: MapSplit, round_ticket: TicketRef) -> None:
    """One class's map file, alone (``ensure_class_files`` of that class), inside the round's ticket."""
    with TaskTicket(round_ticket) as ticket:
        ensure_class_files([task], 0, ticket)


def superseded_in(paths: Sequence[str]) -> list[tuple[int, int]]:
    """``superseded_counts`` of the key classes' files of ``paths``, one list."""
    counts: list[tuple[int, int]] = []
    for path in paths:
        with open(path, "rb") as file:
            blob_bytes, bits_bytes, _keys, _spilled = _FILE_HEADER.unpack(file.read(_FILE_HEADER.size))
            file.seek(blob_bytes, os.SEEK_CUR)
            counts += superseded_counts(file.read(bits_bytes))
    return counts


def superseded_counts(bits: bytes) -> list[tuple[int, int]]:
    """A ``dump_superseded_bits`` bitmap's set bits per bucket of ``SUPERSEDED_BUCKET`` offsets: (the
    bucket's first offset, its count); none for no bitmap. The rewrite ranges are cut by them."""
    if not bits:
        return []
    base = _BITS_BASE.unpack_from(bits)[0]
    step = SUPERSEDED_BUCKET // 8
    return [
        (base + i * SUPERSEDED_BUCKET, int.from_bytes(bits[at : at + step], "little").bit_count())
        for i, at in enumerate(range(_BITS_HEADER, len(bits), step))
    ]


def blob_path(directory: str, end_offset: int, index: int) -> str:
    """Where range ``index``'s blob goes: a ``.cleaned`` name in the log's dir (see the module docstring)."""
    return os.path.join(directory, file_name(end_offset, f".keymap-{index}.cleaned"))


def range_lookup(own: MapSplit | None, blob_paths: Sequence[str]) -> RangeLookup:
    """A rewrite task's lookup: ``own``'s splits mapped here in offset order (a log of one range), or the
    key classes' files of ``blob_paths``: their bitmaps OR'd, their blobs deferred, or a spilled map's
    bitmap alone (see the module docstring)."""
    if own is not None:
        offset_map, spill_classes = _built_map(own, spare_core=False)  # one task a log: a core each
        return RangeLookup(offset_map.lookup, offset_map.size, spill_classes)
    offset_map, keys, spill_classes = OffsetMap(), 0, 0
    for path in blob_paths:
        file_keys, file_classes = _load_class_file(offset_map, path)
        keys, spill_classes = keys + file_keys, max(spill_classes, file_classes)
    return RangeLookup(offset_map.lookup, keys, spill_classes)


def _built_map(task: MapSplit, *, spare_core: bool) -> tuple[OffsetMap, int]:
    """``task``'s map, built; with a budget, bounded (``_bounded_map``); and the classes it spilled to."""
    offset_map = _task_map(task)
    if task.budget is None or offset_map.native is None or not task.splits:
        _map_into(task, offset_map, spare_core=spare_core)
        return offset_map, 0
    try:
        return offset_map, _bounded_map(task, task.budget, offset_map, spare_core=spare_core)
    except (FALLBACK, OSError) as exc:
        directory = os.path.dirname(task.splits[0].log_path)
        logger.warning(
            "%s: the key map of the round over [%d, %d) cannot stay within %d bytes (%s); building it again "
            "in memory, unbounded",
            directory,
            task.start_offset,
            task.end_offset,
            task.budget.share_bytes,
            exc,
        )
        offset_map.clear()  # its spill's files closed now
        offset_map = _task_map(task)
        _map_into(task, offset_map, spare_core=spare_core)
        return offset_map, 0


def _bounded_map(task: MapSplit, budget: KeyMapBudget, offset_map: OffsetMap, *, spare_core: bool) -> int:
    """Map ``task``'s dirty section as ``build_offset_map`` does with a budget: within the thread's share,
    else spilled, the clean section probed and the classes replayed (``key_map_budget``); the classes it
    spilled to (0: it fit). ``FALLBACK``/``OSError``: it cannot, and must be built again unbounded."""
    native = offset_map.native
    if native is None:
        raise RuntimeError("a bounded key map needs cleaner._native")
    directory = Path(task.splits[0].log_path).parent
    bounded = budget.apply(native, directory, task.first_offset, task.start_offset, task.end_offset)
    _map_into(task, offset_map, spare_core=spare_core)
    if not bounded:
        return 0
    if is_spilling(native):
        _probe_clean_section(task.clean_splits, task.start_offset, native)
    return finish_spill(native, task.first_offset)


def _probe_clean_section(splits: Sequence[SegmentSplit], start: int, native: NativeKeyMap) -> None:
    """Every keyed record below ``start`` (the clean section) probed into the spilled map, as
    ``offset_map._probe_clean_section`` does in process: the filter asks about them too."""
    for split in splits:
        with SegmentChunks.of_range(split.log_path, split.start_position, split.end_position) as chunks:
            while chunks.has_more:
                chunks.chunk()
                batch = chunks.batch_here()  # CRC checked
                if batch.base_offset >= start:
                    break
                if not batch.is_control and batch.records_count:
                    spill_probe_records(
                        native, batch.records_bytes(), batch.records_count, batch.base_offset, start
                    )
                chunks.position += batch.size_bytes


def _load_class_file(offset_map: OffsetMap, path: str) -> tuple[int, int]:
    """One class's ``write_partial_map`` file: its bits OR'd into ``offset_map`` and its blob deferred (C),
    or its entries put (pure Python); or, from a map that spilled, its bitmap taken alone. Its number of
    keys and the classes it spilled to. The C map keeps the file's pages mapped until it is dropped (its
    deferred blob is a view of them)."""
    native = offset_map.native
    with open(path, "rb") as file:
        view = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    data = memoryview(view)
    blob_bytes, bits_bytes, keys, spill_classes = _FILE_HEADER.unpack_from(data)
    at = _FILE_HEADER.size
    if len(data) != at + blob_bytes + bits_bytes:
        raise ValueError(
            f"{path}: not a map file ({len(data)} bytes, {blob_bytes} + {bits_bytes} in its header)"
        )
    blob, bits = data[at : at + blob_bytes], data[at + blob_bytes :]
    if spill_classes:
        if native is None or not bits_bytes:
            raise ValueError(f"{path}: a spilled map's bitmap, and no C map to take it")
        take_spilled_bits(native, bits, keys)  # copied: the file is unmapped once this returns
    elif native is None:
        for key, offset in _entries_of(bytes(blob)).items():
            offset_map.put(key, offset)
    elif keys:
        or_superseded_bits(native, bits if bits_bytes else None)
        defer_key_map(native, blob)
    return int(keys), int(spill_classes)


def _map_into(task: MapSplit, offset_map: OffsetMap, *, spare_core: bool) -> None:
    """Map ``task``'s splits into ``offset_map``, in offset order; ``spare_core``: its puts on a thread of
    their own (a key class's map, while the log's other task waits for its file)."""
    native = offset_map.native
    stats = CleanerStats()  # the driver's header replay already counted the map pass
    start, aborted = task.start_offset, task.aborted_batches
    listed = array.array("q", sorted(aborted))  # for the C loop: which transactional batches it reads only
    with puts_on_own_thread(native, spare_core=spare_core):
        for split in task.splits:
            _map_split(split, start, aborted, listed, offset_map, stats)


def _map_split(
    split: SegmentSplit,
    start: int,
    aborted: frozenset[int],
    listed: array.array[int],
    offset_map: OffsetMap,
    stats: CleanerStats,
) -> None:
    """One split's batches into ``offset_map``: runs of data batches (aborted ones and markers read, not
    mapped) in C, any other (not control, not aborted) through ``map_data_batch``."""
    native = offset_map.native
    with SegmentChunks.of_range(split.log_path, split.start_position, split.end_position) as chunks:
        while chunks.has_more:
            buf, at = chunks.chunk()
            if native is not None:
                reached, batches, *_counts = native.map_batches(buf, at, at + RUN_BYTES, start, None, listed)
                if batches:
                    chunks.position = chunks.buffer_start + reached
                    continue
            batch = chunks.batch_here()  # the batch C left (or every batch): Python's, errors included
            if not batch.is_control and batch.base_offset not in aborted:
                map_data_batch(batch, start, offset_map, stats)
            chunks.position += batch.size_bytes


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


def class_tasks(
    log: int, splits: Sequence[SegmentSplit], start_offset: int, aborted: Sequence[int], classes: int
) -> list[MapSplit]:
    """One log's map by key hash: ``classes`` tasks, each over every split of its dirty section (with all
    of its aborted data batches), each mapping one key class."""
    return [
        MapSplit(log, k, tuple(splits), start_offset, frozenset(aborted), key_class=k, classes=classes)
        for k in range(classes)
    ]


def own_map(
    log: int, splits: Sequence[SegmentSplit], start_offset: int, aborted: Sequence[int]
) -> MapSplit | None:
    """The map of a log of one range: its one task maps every split itself, in offset order, with all of
    the dirty section's aborted data batches (None without dirty segments)."""
    return MapSplit(log, 0, tuple(splits), start_offset, frozenset(aborted)) if splits else None

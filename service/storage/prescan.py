"""The system calls of a clean load, made ahead on a thread in C with the GIL released (issue 17).

A clean load of a partition dir is a listing, a ``stat`` of each segment file and three small reads of the
active segment (its offset index, its time index, the ``.log`` from the last index entry), then Python work
on what they returned. ``LogDirPrescan`` makes those calls for every partition dir of a log dir, in order,
a chunk at a time, on a thread of its own (``_dirscan.scan_partitions``: no GIL held while it runs), so
that they run on another core while the interpreter does something else: the loader's Python work for the
partitions before, or, in ``serve``, importing and building the REST API (``start_early_prescans``).

What a scan returned is the dir as it was when scanned. It may stand in for the loader's own calls only
while no other process can change the dir: every prescan runs under the log dir's lock, taken before the
first scan and held through the load (``load_log_dir`` starts one after ``LogManager.startup`` locked the
dir; ``start_early_prescans`` takes the lock itself and hands it to the LogManager). A read-only load (an
inspection: ``explain``, ``retention --dry-run``) takes no lock, but scans only a dir whose clean-shutdown
marker says that no broker or daemon has it open (one that starts meanwhile removes the marker first, as
it would under the inspection's own listing): the inspection reports the dir as it was scanned. Loading
a partition writes only into its own dir, after its scan was taken, and only on the paths that do not use
the scan (recovery, temporary files: ``loader``). The loader checks everything it uses from a scan as it
checks what it reads itself, and reads the files itself whenever the scan lacks an item or disagrees with
the listing. ``LOGCLEANER_PURE_PYTHON=1`` (or a build without a compiler) turns prescans off.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from service.base.errors import ConflictError
from service.storage.dir_lock import LogDirLock
from service.storage.log_files import CLEAN_SHUTDOWN_FILE, LOCK_FILE
from service.storage.native_module import load_native_module
from service.storage.partition_metadata import PARTITION_METADATA_FILE

__all__ = [
    "EarlyPrescans",
    "LogDirPrescan",
    "PartitionScan",
    "PartitionShape",
    "has_dirscan",
    "read_partition_metadata_files",
    "start_early_prescans",
]

logger = logging.getLogger(__name__)

# Partition dirs per C call: the first chunks small (a load that starts with its scan waits for the first
# only), then large (each chunk's results are built holding the GIL, which the loader or the imports wait
# for: fewer, larger handovers cost them less).
FIRST_CHUNK_PARTITIONS = 64
CHUNK_PARTITIONS = 2048
AHEAD_PARTITIONS = 16_384  # scanned ahead of the loader at most: ≈ 2.2 KiB held each, 36 MiB at most
MAX_READ_BYTES = 65_536  # an active segment's file larger than this is left for the loader to read
PARTITION_METADATA_MAX_BYTES = 4096  # of each partition.metadata, read for the stray-replica survey


class PartitionShape(NamedTuple):
    """A partition dir whose every name is a segment file, a snapshot, the epoch checkpoint or
    ``partition.metadata``, every index file with its ``.log``: what the loader's sorting out of the names
    finds (sorted base offsets of the ``.log`` and ``.txnindex`` files, the snapshots' offsets), each log
    base's listed sizes of its ``.log``, ``.index`` and ``.timeindex`` (None: no such file; -1: the stat
    failed), and the other names (the epoch checkpoint, ``partition.metadata``) present. For a scan that
    asked for them (``time_edges``: an inspection), each sealed segment's time-index first and last entries
    as read (12 or 24 bytes; b"" for an empty file; None: not read), else None."""

    log_bases: tuple[int, ...]
    txn_index_bases: tuple[int, ...]
    snapshot_offsets: tuple[int, ...]
    log_sizes: tuple[int | None, ...]
    index_sizes: tuple[int | None, ...]
    time_index_sizes: tuple[int | None, ...]
    other_names: tuple[str, ...]
    time_index_edges: tuple[bytes | None, ...] | None = None


class PartitionScan(NamedTuple):
    """One partition dir as scanned (see ``_dirscan.c``): its ``shape`` if it has one, else ``sizes`` by
    name in listing order (-1: the stat failed); and the active segment's stem, offset index, time index
    and ``.log`` bytes from ``log_position`` (each None if not read); ``next_offset``: the active
    segment's log end offset when those bytes passed, in C, every check the loader makes of them (else
    None: the loader checks them itself)."""

    sizes: dict[str, int] | None
    active_stem: str | None
    offset_index: bytes | None
    time_index: bytes | None
    log_position: int
    log_tail: bytes | None
    shape: PartitionShape | None
    next_offset: int | None = None


_dirscan = load_native_module("service.storage._dirscan")


def has_dirscan() -> bool:
    """True when the C scan is in use (built, and ``LOGCLEANER_PURE_PYTHON`` not set)."""
    return _dirscan is not None


def read_partition_metadata_files(path: Path, names: list[str]) -> dict[str, bytes | None] | None:
    """Each name's ``<path>/<name>/partition.metadata`` (its first bytes; None if it cannot be opened or
    read), read in C with the GIL released; None without the C module (the caller reads them itself)."""
    if _dirscan is None:
        return None
    data = _dirscan.read_small_files(
        os.fspath(path), names, PARTITION_METADATA_FILE, PARTITION_METADATA_MAX_BYTES
    )
    return dict(zip(names, data, strict=True))


class _EarlyRead:
    """``read_partition_metadata_files`` on a thread of its own (the GIL released: it runs beside the
    imports); ``result`` waits for it (None if it failed: the survey then reads the files itself)."""

    def __init__(self, path: Path, names: list[str]) -> None:
        self._result: dict[str, bytes | None] | None = None
        self._thread = threading.Thread(target=self._run, args=(path, names), name="partition-metadata-read")
        self._thread.daemon = True
        self._thread.start()

    def _run(self, path: Path, names: list[str]) -> None:
        try:
            self._result = read_partition_metadata_files(path, names)
        except Exception:
            logger.exception("Reading the partition.metadata files of %s ahead of the start-up failed", path)

    def result(self) -> dict[str, bytes | None] | None:
        self._thread.join()
        return self._result


class LogDirPrescan:
    """Scans ``names`` (partition dirs of ``path``, in the order the loader loads them) on a thread.

    ``take(name)`` hands that name's scan over once (None when it was not scanned or is not a dir). It waits
    only for a chunk the thread is scanning: a loader that caught up with a thread starved of CPU makes its
    own calls for the chunks the thread has not begun, and the thread skips those. Taking a name drops the
    chunks before its own, and the thread scans at most ``AHEAD_PARTITIONS`` beyond the chunk taken last.
    ``close`` stops the thread after its current chunk. ``_cond`` guards ``_chunks``, ``_scanning``,
    ``_scanned``, ``_taken_up_to`` and ``_closed``; the thread is the only writer of ``_chunks`` entries.
    ``time_edges``: also read each sealed segment's time-index edges (``PartitionShape``), which an
    inspection asks for every segment (its largest timestamp) and a start-up does not.
    """

    def __init__(
        self,
        path: Path,
        names: list[str],
        *,
        first_chunk_partitions: int = FIRST_CHUNK_PARTITIONS,
        chunk_partitions: int = CHUNK_PARTITIONS,
        time_edges: bool = False,
    ) -> None:
        self.path = path
        self._time_edges = time_edges
        self.names = names
        self._names = names
        self._starts = [0]  # each chunk's first index in names; chunks double up to chunk_partitions
        size = first_chunk_partitions
        while self._starts[-1] < len(names):
            self._starts.append(self._starts[-1] + size)
            size = min(size * 2, chunk_partitions)
        self._chunk_count = len(self._starts) - 1
        self._chunk_of = {
            name: chunk
            for chunk in range(self._chunk_count)
            for name in names[self._starts[chunk] : self._starts[chunk + 1]]
        }
        self._chunks: dict[int, dict[str, PartitionScan | None]] = {}
        self._scanning = -1  # the chunk the thread is scanning now
        self._scanned = 0  # chunks done (scanned or skipped)
        self._taken_up_to = 0  # the chunk the loader asked for last
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="log-dir-prescan", daemon=True)

    def start(self) -> LogDirPrescan:
        if _dirscan is None:
            self._closed = True
        else:
            self._thread.start()
        return self

    def take(self, name: str) -> PartitionScan | None:
        chunk = self._chunk_of.get(name)
        if chunk is None:
            return None
        with self._cond:
            if chunk > self._taken_up_to:
                for old in range(self._taken_up_to, chunk):
                    self._chunks.pop(old, None)
                self._taken_up_to = chunk
                self._cond.notify_all()
            while self._scanned <= chunk and not self._closed:
                if self._scanning < chunk:  # not begun: quicker to make the calls than to wait
                    return None
                self._cond.wait()
            scans = self._chunks.get(chunk)
            return None if scans is None else scans.pop(name, None)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._chunks.clear()
            self._cond.notify_all()

    def _run(self) -> None:
        if _dirscan is None:  # start() runs this thread only with the module
            return
        try:
            for chunk in range(self._chunk_count):
                with self._cond:
                    while self._ahead(chunk) and not self._closed:
                        self._cond.wait()
                    if self._closed:
                        return
                    skip = chunk < self._taken_up_to  # the loader is past it already
                    self._scanning = chunk
                names = self._names[self._starts[chunk] : self._starts[chunk + 1]]
                items = (
                    []
                    if skip
                    else _dirscan.scan_partitions(
                        os.fspath(self.path), names, MAX_READ_BYTES, self._time_edges
                    )
                )
                scans = {name: _scan_of(item) for name, item in zip(names, items, strict=False)}
                with self._cond:
                    if not skip and chunk >= self._taken_up_to:
                        self._chunks[chunk] = scans
                    self._scanned = chunk + 1
                    self._cond.notify_all()
        except Exception:  # the loader then makes its own calls: nothing is lost but the head start
            logger.exception("Scanning the partition dirs of %s ahead of the load failed", self.path)
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()

    def _ahead(self, chunk: int) -> bool:
        """Whether ``chunk`` would end more than ``AHEAD_PARTITIONS`` past the chunk the loader took last."""
        return self._starts[chunk + 1] - self._starts[self._taken_up_to] > AHEAD_PARTITIONS


def _scan_of(item: tuple[Any, ...] | None) -> PartitionScan | None:
    if item is None:
        return None
    if item[6] is None:
        return PartitionScan._make(item)
    sizes, stem, offset_index, time_index, log_position, log_tail, shape, next_offset = item
    return PartitionScan(
        sizes, stem, offset_index, time_index, log_position, log_tail, PartitionShape(*shape), next_offset
    )


class EarlyPrescans:
    """``serve``'s prescans, started before the API is imported: each with its log dir's lock held, and
    beside it the read of every partition dir's ``partition.metadata`` that the stray-replica survey makes
    before the load (``partition_metadata``)."""

    def __init__(self) -> None:
        self._by_path: dict[Path, tuple[LogDirLock, LogDirPrescan]] = {}
        self._metadata: dict[Path, _EarlyRead] = {}

    def add(self, path: Path, lock: LogDirLock, prescan: LogDirPrescan) -> None:
        self._by_path[path] = (lock, prescan)
        self._metadata[path] = _EarlyRead(path, prescan.names)

    def partition_metadata(self, path: Path) -> dict[str, bytes | None] | None:
        """The ``partition.metadata`` bytes of each entry of ``path`` listed early (read under its lock, so
        still what is there), or None (no early read of ``path``); waits for the read."""
        early = self._metadata.get(path)
        return None if early is None else early.result()

    def take(self, path: Path) -> tuple[LogDirLock, LogDirPrescan] | None:
        """The held lock and running prescan of ``path`` (handed over once), or None."""
        return self._by_path.pop(path, None)

    def close(self) -> None:
        """Stop the prescans and release the locks not handed over (a start-up that failed before)."""
        for lock, prescan in self._by_path.values():
            prescan.close()
            lock.release()
        self._by_path.clear()


def start_early_prescans(log_dirs: Iterable[Path]) -> EarlyPrescans:
    """Lock each log dir a clean shutdown left (its lock file and clean-shutdown marker there: nothing is
    created) and start scanning its partition dirs. A dir that is locked elsewhere, missing or unreadable
    is left to the start-up's own checks, which report it."""
    early = EarlyPrescans()
    if _dirscan is None:
        return early
    for path in log_dirs:
        try:
            if not (os.path.exists(path / LOCK_FILE) and os.path.exists(path / CLEAN_SHUTDOWN_FILE)):
                continue
            lock = LogDirLock(path)
            lock.acquire()
        except (ConflictError, OSError):
            continue
        try:
            names = sorted(os.listdir(path))
        except OSError:
            lock.release()
            continue
        early.add(path, lock, LogDirPrescan(path, names).start())
    return early

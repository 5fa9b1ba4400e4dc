"""One log segment: a ``.log`` file of record batches plus its lazy offset, time and transaction indexes.

Files: ``<20-digit base offset>.log`` (created eagerly), ``.index``, ``.timeindex`` (created on first
access), ``.txnindex`` (created on the first aborted transaction). A temporary state (``.cleaned``,
``.swap``, ``.deleted``) is a second suffix on every file, changed with ``change_file_suffixes``.

Index entries follow Kafka's rule: an entry (last offset of the append, position of its start) is added
when more than ``index.interval.bytes`` were appended since the last one; the time index gets
(max timestamp so far, offset of that max) with it. Rolling or closing appends one more time-index entry
and trims both indexes to their entries, so the segment's largest timestamp is read back from the last
time-index entry after a restart without scanning the log. Not thread-safe: ``PartitionLog`` locks.

Descriptors: a segment holds at most one, its ``.log`` opened for writing by the first append (in practice
only the active segment's), and none once ``release`` or ``close_file`` ran. Indexes keep none (see
``index_file``). Every read (``batches``, the first batch's header) opens its own read-only descriptor and
closes it when it ends, so a reader never shares one that a roll, retention or the cleaner may close, and
the process's descriptors stay bounded by the active segments plus the reads in flight. A write not yet
fsynced stays pending when the descriptor is closed: ``flush`` opens the file again to fsync it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from service.base.errors import CorruptDataError, LogClosedError, UnsupportedFormatError
from service.storage.atomic import fsync_file
from service.storage.file_records import iter_file_batches
from service.storage.index_file import (
    IndexFile,
    check_index_file_length,
    check_listed_index_length,
    check_whole_entries,
    listed_index_length_passes,
)
from service.storage.log_config import LogConfig
from service.storage.log_files import (
    INDEX_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    file_name,
    segment_path,
)
from service.storage.offset_index import OffsetIndex
from service.storage.records import BATCH_HEADER, NO_TIMESTAMP, RecordBatch
from service.storage.time_index import TimeIndex
from service.storage.txn_index import AbortedTxn, TransactionIndex

__all__ = ["LogSegment", "RecoveredSegment", "TIMESTAMP_SOURCE_MTIME", "TIMESTAMP_SOURCE_RECORD"]

logger = logging.getLogger(__name__)

TIMESTAMP_SOURCE_RECORD = "record"
TIMESTAMP_SOURCE_MTIME = "mtime"
_INT32_MAX = (1 << 31) - 1
_UNKNOWN = -2  # sentinel for lazily computed values
_TIME_ENTRY = struct.Struct(">qi")  # a time-index entry: timestamp, offset relative to the base


class RecoveredSegment(NamedTuple):
    """What ``LogSegment.recover`` found: the bytes it truncated, and the offset after the last batch kept."""

    truncated_bytes: int
    next_offset: int


class LogSegment:
    __slots__ = (
        "_bytes_since_last_index_entry",
        "_closed",
        "_fd",
        "_index_bytes",
        "_indexes_checked",
        "_indexes_grow",
        "_is_dirty",
        "_log_file",
        "_log_path",
        "_max_timestamp",
        "_mtime_ms",
        "_offset_index",
        "_offset_of_max_timestamp",
        "_record_tally",
        "_rolling_based_timestamp",
        "_size",
        "_stem",
        "_time_edges",
        "_time_index",
        "_txn_index",
        "base_offset",
        "created_ms",
        "directory",
        "index_interval_bytes",
        "rolling_jitter_ms",
        "suffix",
    )

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        config: LogConfig,
        created_ms: int,
        suffix: str = "",
        size_bytes: int | None = None,
        rolling_jitter_ms: int = 0,
        dir_prefix: str | None = None,
    ) -> None:
        """``dir_prefix``: ``os.path.join(directory, "")``, if the caller (the loader, for each segment of a
        dir) has it already."""
        self.directory = directory
        self.base_offset = base_offset
        self.suffix = suffix
        self.index_interval_bytes = config.index_interval_bytes
        self.created_ms = created_ms
        self.rolling_jitter_ms = rolling_jitter_ms
        # File names are strings joined once, and the index objects are built on first use: at 100,000
        # segments a Path per file, and objects the garbage collector walks again and again while the
        # rest load, cost more than the loading itself.
        if dir_prefix is None:
            dir_prefix = os.path.join(directory, "")
        self._stem = dir_prefix + file_name(base_offset, "")
        self._log_file = self._stem + LOG_SUFFIX + suffix
        self._log_path: Path | None = None
        self._index_bytes = config.segment_index_bytes
        self._indexes_grow = False  # a cleaned segment's: see ``create``
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._time_edges: tuple[int, bytes] | None = None  # see ``prime_time_index_edges``
        self._txn_index: TransactionIndex | None = None
        # The index files are as a clean close leaves them (trimmed, the final time-index entry written):
        # set by ``check_index_files`` and ``release``, cleared by whatever changes the segment.
        self._indexes_checked = False
        self._size = os.stat(self._log_file).st_size if size_bytes is None else size_bytes
        self._fd: int | None = None
        self._is_dirty = False
        self._max_timestamp = _UNKNOWN
        self._offset_of_max_timestamp = _UNKNOWN
        self._rolling_based_timestamp = _UNKNOWN
        self._record_tally = (0, 0)  # (position, records before it): see record_count
        self._mtime_ms: int | None = None
        self._bytes_since_last_index_entry = 0
        self._closed = False  # set by close/abandon: no file is opened again by path (it may name another's)

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        *,
        config: LogConfig,
        now_ms: int,
        suffix: str = "",
        indexes_grow: bool = False,
    ) -> LogSegment:
        """A new empty segment; its ``.log`` file exists at once (indexes stay lazy).

        Files already at its names belong to no segment of the log (a copy dropped into the dir, say): as
        Kafka's roll does, they are deleted first, with a warning, so that the new segment starts empty and
        a stale ``.timeindex`` cannot lend it a largest timestamp (nor a stale ``.index`` its entries).

        ``indexes_grow``: a full index grows instead of refusing the entry (a cleaned segment, which cannot
        roll: its group's indexes fit ``segment.index.bytes``, Kafka's rule, but its shorter batches can
        still need more entries than theirs; the trim at its end leaves the file as long as its entries).
        """
        path = segment_path(directory, base_offset, LOG_SUFFIX + suffix)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            logger.warning("Newly created segment file %s already exists; emptying it first", path)
            fd = os.open(path, os.O_RDWR | os.O_TRUNC)
        os.close(fd)
        for index_suffix in INDEX_SUFFIXES:
            stale = segment_path(directory, base_offset, index_suffix + suffix)
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
                logger.warning("Newly created segment file %s already exists; deleted it first", stale)
        segment = cls(
            directory,
            base_offset,
            config=config,
            created_ms=now_ms,
            suffix=suffix,
            size_bytes=0,
            rolling_jitter_ms=roll_jitter_ms(config),
        )
        segment._indexes_grow = indexes_grow
        segment._max_timestamp, segment._offset_of_max_timestamp = NO_TIMESTAMP, base_offset  # as recover()
        return segment

    # -- sizes, offsets and timestamps -------------------------------------------------------------

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._refuse_if_closed()
            self._offset_index = OffsetIndex(
                self._stem + INDEX_SUFFIX + self.suffix, self.base_offset, self._index_bytes
            )
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._refuse_if_closed()
            self._time_index = TimeIndex(
                self._stem + TIME_INDEX_SUFFIX + self.suffix, self.base_offset, self._index_bytes
            )
            if self._time_edges is not None:
                self._time_index.prime_edge_entries(*self._time_edges)
                self._time_edges = None
        return self._time_index

    def time_index_edges_wanted(self) -> str | None:
        """The ``.timeindex`` file, when its largest timestamp is not known yet and no scan or built index
        holds its edges (what ``prime_time_index_edges`` would give); else None."""
        if self._max_timestamp != _UNKNOWN or self._time_index is not None or self._time_edges is not None:
            return None
        return self._stem + TIME_INDEX_SUFFIX + self.suffix

    def prime_time_index_edges(self, length: int, edges: bytes) -> None:
        """The ``.timeindex``'s length and first and last entries as a scan read them (an inspection's
        prescan, ``service.storage.prescan``; the summary's ``largest_timestamps``): the time index, once
        built, takes them instead of reading its file for its largest timestamp and its checks."""
        self._time_edges = (length, edges)

    @property
    def txn_index(self) -> TransactionIndex:
        if self._txn_index is None:
            self._refuse_if_closed()
            self._txn_index = TransactionIndex(self._stem + TXN_INDEX_SUFFIX + self.suffix, self.base_offset)
        return self._txn_index

    @property
    def log_path(self) -> Path:
        """The ``.log`` file (with the segment's suffix); built on first use."""
        if self._log_path is None:
            self._log_path = Path(self._log_file)
        return self._log_path

    @property
    def size_bytes(self) -> int:
        return self._size

    def _file(self) -> int:
        """The descriptor appends write through, opened on first use and kept until ``close_file``."""
        if self._fd is None:
            self._refuse_if_closed()
            self._fd = os.open(self._log_file, os.O_RDWR | os.O_CLOEXEC)
        return self._fd

    def _open_for_read(self) -> int:
        """A read-only descriptor of the ``.log`` for one read; the caller closes it.

        If retention or a swap renamed the file between reading its name and opening it, the new name is
        tried once (the renamed file lives on until its delayed deletion).
        """
        self._refuse_if_closed()
        file = self._log_file
        try:
            return os.open(file, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            if self._log_file == file:
                raise
            return os.open(self._log_file, os.O_RDONLY | os.O_CLOEXEC)

    def _load_max_timestamp(self) -> None:
        """From the time index's last entry, which a roll or close wrote (read once, then kept).

        Runs the time index's content check that loading after a clean shutdown defers to here: it needs
        no more I/O (the first and last entries were just read) and a corrupt file raises CorruptDataError
        rather than give retention a wrong largest timestamp. Edges a scan read (``prime_time_index_edges``)
        that pass that check give it without building the index; any other go through the index, which
        says what is wrong.
        """
        if self._time_index is None and self._time_edges is not None and self._max_timestamp_from_edges():
            return
        timestamp, offset = self.time_index.last_entry()
        self.time_index.sanity_check()
        self._max_timestamp = timestamp if timestamp >= 0 else NO_TIMESTAMP
        self._offset_of_max_timestamp = offset

    def _max_timestamp_from_edges(self) -> bool:
        """``_load_max_timestamp`` from the scanned edges if they pass the time index's check (True)."""
        length, data = self._time_edges or (-1, b"")
        size = _TIME_ENTRY.size
        if length < 0 or length % size or len(data) != min(length, 2 * size):
            return False
        if not data:
            self._max_timestamp, self._offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
            return True
        first_timestamp, _ = _TIME_ENTRY.unpack_from(data, 0)
        timestamp, relative = _TIME_ENTRY.unpack_from(data, len(data) - size)
        if timestamp < first_timestamp or relative < 0:
            return False
        self._max_timestamp = timestamp if timestamp >= 0 else NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset + relative
        return True

    @property
    def max_timestamp_so_far(self) -> int:
        """The largest record timestamp appended (-1 if none), from memory or the time index."""
        if self._max_timestamp == _UNKNOWN:
            self._load_max_timestamp()
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        if self._offset_of_max_timestamp == _UNKNOWN:
            self._load_max_timestamp()
        return self._offset_of_max_timestamp

    def last_modified_ms(self) -> int:
        if self._mtime_ms is None:
            self._mtime_ms = os.stat(self._log_file).st_mtime_ns // 1_000_000
        return self._mtime_ms

    def set_last_modified_ms(self, mtime_ms: int) -> None:
        os.utime(self._log_file, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
        self._mtime_ms = mtime_ms

    def largest_timestamp(self) -> tuple[int, str]:
        """Kafka's ``largestTimestamp`` and its source: a record, or the file mtime if no record has one."""
        largest = self.max_timestamp_so_far
        if largest >= 0:
            return largest, TIMESTAMP_SOURCE_RECORD
        return self.last_modified_ms(), TIMESTAMP_SOURCE_MTIME

    @property
    def rolling_based_timestamp(self) -> int | None:
        """Max timestamp of the segment's first append (Kafka ``rollingBasedTimestamp``); None if empty."""
        if self._rolling_based_timestamp == _UNKNOWN:
            if self._size < BATCH_HEADER.size:
                return None
            fd = self._open_for_read()
            try:
                raw = os.pread(fd, BATCH_HEADER.size, 0)
            finally:
                os.close(fd)
            header = BATCH_HEADER.unpack(raw)
            self._rolling_based_timestamp = header[8]
        return self._rolling_based_timestamp

    def first_batch_timestamp(self) -> int | None:
        """For max-compaction-lag: the rolling-based timestamp if it is a real one, else None (∞)."""
        timestamp = self.rolling_based_timestamp
        return timestamp if timestamp is not None and timestamp >= 0 else None

    def time_waited_for_roll(self, now_ms: int, incoming_max_timestamp: int) -> int:
        rolling = self.rolling_based_timestamp
        if rolling is not None and rolling >= 0:
            return incoming_max_timestamp - rolling
        return now_ms - self.created_ms

    def should_roll(
        self,
        config: LogConfig,
        *,
        incoming_bytes: int,
        incoming_max_timestamp: int,
        incoming_last_offset: int,
        now_ms: int,
    ) -> bool:
        """Kafka's four roll conditions (``LogSegment.shouldRoll``), checked before every append."""
        if self._size > config.segment_bytes - incoming_bytes:
            return True
        if self._size > 0 and (
            self.time_waited_for_roll(now_ms, incoming_max_timestamp)
            > config.max_segment_ms - self.rolling_jitter_ms
        ):
            return True
        if self.offset_index.is_full() or self.time_index.is_full():
            return True
        return incoming_last_offset - self.base_offset > _INT32_MAX

    # -- append and read ---------------------------------------------------------------------------

    def append(
        self, data: bytes, *, largest_offset: int, max_timestamp: int, offset_of_max_timestamp: int
    ) -> None:
        """Append whole batches; index them by Kafka's interval rule."""
        self._check_fits(largest_offset)
        position = self._write_at_end(data)
        if position == 0:
            self._rolling_based_timestamp = max_timestamp
        self._size += len(data)
        if max_timestamp > self.max_timestamp_so_far:
            self._max_timestamp = max_timestamp
            self._offset_of_max_timestamp = offset_of_max_timestamp
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self._append_index_entries(
                largest_offset, position, self.max_timestamp_so_far, self.offset_of_max_timestamp
            )
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += len(data)

    def append_batches(
        self,
        data: bytes | memoryview,
        sizes: Sequence[int],
        last_offsets: Sequence[int],
        max_timestamps: Sequence[int],
    ) -> None:
        """``append`` of several whole batches laid end to end in ``data`` (batch i: ``sizes[i]`` bytes,
        its last offset, its max timestamp, also the offset of that timestamp): one write, and the index
        entries each ``append`` would have made. Zero sizes are skipped."""
        if not len(data):
            return
        if sum(sizes) != len(data):
            raise ValueError(f"batch sizes add up to {sum(sizes)}, not the {len(data)} bytes given")
        for last in (last_offsets[0], max(last_offsets)):
            self._check_fits(last)
        position = self._write_at_end(data)
        if position == 0:
            self._rolling_based_timestamp = next(t for s, t in zip(sizes, max_timestamps, strict=True) if s)
        max_timestamp, offset_of_max = self.max_timestamp_so_far, self.offset_of_max_timestamp
        since_entry, interval = self._bytes_since_last_index_entry, self.index_interval_bytes
        entries: list[tuple[int, int, int, int]] = []  # what _append_index_entries would get, in order
        for size, last_offset, timestamp in zip(sizes, last_offsets, max_timestamps, strict=True):
            if not size:
                continue
            if timestamp > max_timestamp:
                max_timestamp, offset_of_max = timestamp, last_offset
            if since_entry > interval:
                entries.append((last_offset, position, max_timestamp, offset_of_max))
                since_entry = 0
            since_entry += size
            position += size
        self._append_many_index_entries(entries)
        self._size = position
        self._max_timestamp, self._offset_of_max_timestamp = max_timestamp, offset_of_max
        self._bytes_since_last_index_entry = since_entry

    def _check_fits(self, offset: int) -> None:
        if offset - self.base_offset > _INT32_MAX or offset < self.base_offset:
            raise ValueError(f"offset {offset} does not fit segment {self.base_offset}")

    def _write_at_end(self, data: bytes | memoryview) -> int:
        """Write ``data`` after the last byte (the size is the caller's to move); returns where it went."""
        position = self._size
        self._indexes_checked = False
        written = os.pwrite(self._file(), data, position)
        if written != len(data):
            raise OSError(f"short write to {self.log_path}: {written} of {len(data)} bytes")
        self._is_dirty = True
        self._mtime_ms = None
        return position

    def _append_index_entries(
        self, offset: int, position: int, max_timestamp: int, offset_of_max: int
    ) -> None:
        if self._indexes_grow:
            for index in (self.offset_index, self.time_index):
                if index.is_full():
                    index.resize(max(2 * index.max_entries, 8) * index.entry_size)
        self.offset_index.append(offset, position)
        self.time_index.append(max_timestamp, offset_of_max)

    def _append_many_index_entries(self, entries: Sequence[tuple[int, int, int, int]]) -> None:
        """``_append_index_entries`` of each entry in turn; for growing indexes (a ``.cleaned`` segment's)
        one resize and one bulk append per index (the same entries; the files are trimmed when it closes)."""
        if not self._indexes_grow:
            for offset, position, max_timestamp, offset_of_max in entries:
                self._append_index_entries(offset, position, max_timestamp, offset_of_max)
            return
        if not entries:
            return
        for index, reserved in ((self.offset_index, 0), (self.time_index, 1)):  # the time index keeps a slot
            needed = index.entries + len(entries) + reserved
            if index.max_entries < needed:
                index.resize(max(2 * index.max_entries, 8, needed) * index.entry_size)
        offsets, positions, max_timestamps, offsets_of_max = zip(*entries, strict=True)
        self.offset_index.append_many(offsets, positions)
        self.time_index.append_many(max_timestamps, offsets_of_max)

    def preallocate_indexes(self) -> None:
        """Give a full index room again (``segment.index.bytes``), before an append to the active segment.

        A loaded segment's indexes are trimmed to their entries, so full: the loader leaves them so (Kafka
        resizes its lazy indexes on first use), and the first append after a load resizes them here.
        An index full at its preallocated size stays full, and the log rolls.
        """
        for index in (self.offset_index, self.time_index):
            if index.is_full():
                index.resize(self._index_bytes)

    def append_aborted_txn(self, aborted: AbortedTxn) -> None:
        self._indexes_checked = False
        self.txn_index.append(aborted)

    def batches(self, start_position: int = 0, *, verify_crc: bool = False) -> Iterator[RecordBatch]:
        """Batches from ``start_position`` to the size at the first ``next``, through a descriptor of
        their own, closed when the iteration ends, is closed, or the iterator is dropped."""
        fd = self._open_for_read()
        try:
            yield from iter_file_batches(
                fd, start_position, self._size, path=self._log_file, verify_crc=verify_crc
            )
        finally:
            os.close(fd)

    def record_count(self) -> int:
        """The records in the segment (the API's partition document shows them per segment).

        Each batch header is read once: the count is kept with the position it reached, and a later call
        reads only the batches appended since (a segment changes only by appends, and a truncation starts
        the count again). The count and its position are one tuple, so calls racing on other threads, or
        an append, never leave one without the other.
        """
        position, count = self._record_tally
        if position < self._size:
            for batch in self.batches(position):
                count += batch.records_count
                position = batch.position + batch.size_bytes
            self._record_tally = (position, count)
        return count

    def read_from(self, offset: int) -> Iterator[RecordBatch]:
        """Batches from the first one whose last offset ≥ ``offset`` (found through the offset index)."""
        _, position = self.offset_index.lookup(offset)
        for batch in self.batches(position):
            if batch.last_offset >= offset:
                yield batch

    def read_next_offset(self, *, tail: tuple[int, bytes] | None = None) -> int:
        """The offset after the last batch: scanned from the last offset-index entry, as Kafka does.

        ``tail``: (position, the ``.log``'s bytes from there to its end) as the caller read them (a
        prescan); used instead of reading the file if that position is the last index entry's."""
        _, position = self.offset_index.lookup(self.offset_index.last_offset)
        next_offset = self.base_offset
        if tail is not None and tail[0] == position and position + len(tail[1]) == self._size:
            batches = iter_file_batches(
                None, position, self._size, path=self._log_file, verify_crc=False, preread=tail[1]
            )
        else:
            batches = self.batches(position)
        for batch in batches:
            next_offset = batch.next_offset
        return next_offset

    # -- recovery ----------------------------------------------------------------------------------

    def recover(self, on_batch: Callable[[RecordBatch], list[AbortedTxn]] | None = None) -> RecoveredSegment:
        """Rebuild the indexes from the log; truncate at the first invalid batch. Returns the bytes dropped
        and the offset after the last valid batch (the log end offset if this is the active segment: the
        loader need not read it again).

        Every batch's size, CRC and offset range is checked. ``on_batch`` sees each valid batch and returns
        the aborted transactions it completes, which go into the rebuilt ``.txnindex``.
        """
        self.offset_index.truncate()
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.truncate()
        self.time_index.resize(self.time_index.max_index_size)
        self.txn_index.truncate_to(self.base_offset)
        self._indexes_checked = False
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset
        self._rolling_based_timestamp = _UNKNOWN
        valid_bytes = 0
        last_index_entry = 0
        next_offset = self.base_offset
        try:
            for batch in self.batches(0, verify_crc=True):
                if batch.base_offset < self.base_offset or batch.last_offset - self.base_offset > _INT32_MAX:
                    raise CorruptDataError(
                        f"batch offsets [{batch.base_offset}, {batch.last_offset}] do not belong to the "
                        f"segment with base offset {self.base_offset}",
                        path=str(self.log_path),
                        position=batch.position,
                    )
                if batch.max_timestamp > self._max_timestamp:
                    self._max_timestamp = batch.max_timestamp
                    self._offset_of_max_timestamp = batch.last_offset
                if valid_bytes - last_index_entry > self.index_interval_bytes:
                    self.offset_index.append(batch.last_offset, valid_bytes)
                    self.time_index.append(self._max_timestamp, self._offset_of_max_timestamp)
                    last_index_entry = valid_bytes
                valid_bytes += batch.size_bytes
                next_offset = batch.next_offset
                if on_batch is not None:
                    for aborted in on_batch(batch):
                        self.txn_index.append(aborted)
        except UnsupportedFormatError:
            raise  # an old-format segment is not corrupt: truncating it would lose data
        except CorruptDataError as exc:
            logger.warning(
                "Found invalid bytes in %s at position %d (%s); truncating to %d bytes, dropping %d",
                self.log_path,
                valid_bytes,
                exc.reason,
                valid_bytes,
                self._size - valid_bytes,
            )
        dropped = self._size - valid_bytes
        if dropped:
            self.truncate_to_position(valid_bytes)
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        # As after a roll or close: the final time-index entry, both indexes trimmed (the loader
        # re-expands the active segment's), so the next load finds them valid. Then the segment is left
        # as a clean load leaves it: no descriptor, no entries in memory (only the fsyncs are pending),
        # so recovering a log of thousands of segments holds none of them open.
        self.time_index.append(self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.release()
        return RecoveredSegment(dropped, next_offset)

    def truncate_to_position(self, position: int, *, now_ms: int | None = None) -> None:
        """Cut the log at a batch boundary; a segment cut to empty waits for its roll afresh."""
        self._indexes_checked = False
        if self._fd is not None:
            os.ftruncate(self._fd, position)
        else:
            os.truncate(self._log_file, position)
        self._size = position
        self._record_tally = (0, 0)
        self._is_dirty = True
        self._mtime_ms = None
        if position == 0:
            self._rolling_based_timestamp = _UNKNOWN
            if now_ms is not None:
                self.created_ms = now_ms

    def sanity_check(
        self,
        *,
        has_txn_index: bool = True,
        load_offset_index: bool = False,
        offset_index_bytes: bytes | None = None,
        time_index_bytes: bytes | None = None,
    ) -> None:
        """Raise if an index file is missing or corrupt (the loader then rebuilds the segment).

        The full check, reading each index's first and last entries: the loader runs it after an unclean
        shutdown, and on the active segment after a clean one (``check_index_files`` on the others). With
        ``load_offset_index`` the offset index is read whole first and checked in memory (for the active
        segment, whose end offset is found through it next); a ``.txnindex`` is checked if
        ``has_txn_index`` (the caller's directory listing says whether the file exists).
        ``offset_index_bytes`` and ``time_index_bytes`` are those files' whole content if the caller read
        them (a prescan): checked and used as the files would be, not read again.
        """
        offset_index = self.offset_index
        if offset_index_bytes is None:
            offset_index.check_file_length(must_exist=True)
            if load_offset_index:
                offset_index.load()
        else:  # it exists; its length is the bytes'
            check_whole_entries(
                len(offset_index_bytes),
                OffsetIndex.entry_size,
                kind=OffsetIndex.kind,
                path=self._stem + INDEX_SUFFIX + self.suffix,
            )
            if load_offset_index:
                offset_index.load_bytes(offset_index_bytes)
            else:
                offset_index.prime_edges(offset_index_bytes)
        offset_index.sanity_check()
        if time_index_bytes is not None:
            self.time_index.prime_edges(time_index_bytes)
        self.time_index.sanity_check()
        if has_txn_index:
            self.txn_index.sanity_check()

    def check_index_files(
        self, *, has_txn_index: bool = True, listed_lengths: tuple[int | None, int | None] | None = None
    ) -> None:
        """Kafka 3.x's ``LogSegment.sanityCheck`` at load: raise if the indexes cannot be used as they are.

        The offset index must exist; the offset and time indexes must hold whole entries (one ``os.stat``
        each, no entry read); the transaction index, if ``has_txn_index`` (the caller's directory listing
        says whether the file exists), gets its full check, as in Kafka. The content checks of
        ``sanity_check`` (last offset not below the base, timestamps in order) are not run here, as Kafka
        does not run them: a clean shutdown wrote and fsynced these files, trimmed, and an unclean one makes
        the loader rebuild every segment from the recovery point anyway. The time index's last entry is read
        when retention first asks for the largest timestamp, and checked then (``max_timestamp_so_far``).
        ``listed_lengths``: the offset and time indexes' lengths as a listing of the dir gave them (a
        prescan; ``check_listed_index_length``), instead of a ``stat`` each.
        """
        if (  # the common case first: both listed and whole, no file name made for an error
            listed_lengths is not None
            and not has_txn_index
            and listed_index_length_passes(listed_lengths[0], OffsetIndex, must_exist=True)
            and listed_index_length_passes(listed_lengths[1], TimeIndex, must_exist=False)
        ):
            self._indexes_checked = True
            return
        index_file = self._stem + INDEX_SUFFIX + self.suffix
        time_index_file = self._stem + TIME_INDEX_SUFFIX + self.suffix
        if listed_lengths is None:
            check_index_file_length(index_file, OffsetIndex, must_exist=True)
            check_index_file_length(time_index_file, TimeIndex, must_exist=False)
        else:
            check_listed_index_length(index_file, listed_lengths[0], OffsetIndex, must_exist=True)
            check_listed_index_length(time_index_file, listed_lengths[1], TimeIndex, must_exist=False)
        if has_txn_index:
            self.txn_index.sanity_check()
        self._indexes_checked = True

    def mark_index_files_clean(self) -> None:
        """The loader found this active segment's index files as a clean close leaves them (the full
        ``sanity_check`` and its checks against the log passed): ``close`` then rewrites none of them
        unless something changes the segment first (the final time-index entry it would append is the
        file's last one already)."""
        self._indexes_checked = True

    # -- lifecycle ---------------------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """After a roll: final time-index entry, indexes trimmed to their entries, log to its size."""
        self.time_index.append(self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        if self._fd is not None:
            os.ftruncate(self._fd, self._size)

    @property
    def awaits_flush(self) -> bool:
        """Whether the ``.log`` was written since its last fsync (``flush``)."""
        return self._is_dirty

    def flush(self) -> None:
        """fsync what was written since the last flush, through the writer's descriptor or a new one."""
        if self._is_dirty:
            if self._fd is not None:
                os.fsync(self._fd)
            else:
                fsync_file(self._log_file)
            self._is_dirty = False
        for index in self._opened_indexes():
            index.flush()

    def close(self) -> None:
        """Close cleanly: the final time-index entry and trimmed indexes let Kafka and us reopen it.

        As in Kafka (whose lazy indexes are closed only if loaded), a segment whose index files are as a
        clean close leaves them (they passed ``check_index_files``, or ``release`` left them so, and
        nothing changed the segment since) leaves alone each index not in memory and appends no final
        time-index entry: it is the file's last one. At 100,000 segments, shutdown then costs what the
        segments were used for, not a read of every index.
        """
        if self._indexes_checked:
            indexes = [i for i in (self._offset_index, self._time_index) if i is not None and i.is_loaded]
        else:
            if self.max_timestamp_so_far >= 0:
                self.time_index.append(
                    self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True
                )
            indexes = [self.offset_index, self.time_index]
        for index in indexes:
            index.trim_to_valid_size()
        self.flush()
        for opened in self._opened_indexes():
            opened.close()
        self.close_file()
        self._closed = True
        self._offset_index = self._time_index = self._txn_index = None

    def abandon(self) -> None:
        """Release every file without writing (an I/O error in its dir, or its log deleted); the segment
        stays closed."""
        self._closed = True
        if self._offset_index is not None or self._time_index is not None or self._txn_index is not None:
            for index in self._opened_indexes():
                index.discard()
            self._offset_index = self._time_index = self._txn_index = None
        if self._fd is not None:  # an inspection's segments hold none (10,000s abandoned at its end)
            with contextlib.suppress(OSError):
                self.close_file()

    def _refuse_if_closed(self) -> None:
        """A closed segment's path may name another topic's file by now (deleted, re-created)."""
        if self._closed:
            raise LogClosedError(f"segment {self.base_offset} of {self.directory.name} is closed")

    def _opened_indexes(self) -> list[IndexFile]:
        """The index objects built so far (the properties build them on first use)."""
        return [i for i in (self._offset_index, self._time_index, self._txn_index) if i is not None]

    def close_file(self) -> None:
        """Close the ``.log`` descriptor; an unsynced write stays pending for ``flush``."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def release(self) -> None:
        """Leave the segment as a clean load does: no descriptor, indexes trimmed and not in memory.

        For a segment that is no longer active (after a roll, a recovery, a swap); nothing is fsynced
        here, a pending fsync is done by the next ``flush``. The next use opens what it needs again. A
        largest timestamp not known yet was never appended through this object, so the time index
        already ends with it (its writer's roll or close wrote it: a swapped-in cleaned segment's): not
        read here.
        """
        if self._max_timestamp >= 0:  # a no-op after a roll or a recovery, which wrote it
            self.time_index.append(self._max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.close_file()
        for index in self._opened_indexes():
            index.unload()  # trims what is in memory
        self._indexes_checked = True

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment, e.g. ``""`` → ``.deleted`` or ``.cleaned`` → ``.swap``."""
        if self.suffix != old_suffix:
            raise ValueError(f"segment {self.log_path} has suffix {self.suffix!r}, not {old_suffix!r}")
        stem = self._stem
        new_log = stem + LOG_SUFFIX + new_suffix
        os.replace(self._log_file, new_log)
        self._log_file, self._log_path = new_log, None
        self.offset_index.rename_to(stem + INDEX_SUFFIX + new_suffix)
        self.time_index.rename_to(stem + TIME_INDEX_SUFFIX + new_suffix)
        self.txn_index.rename_to(stem + TXN_INDEX_SUFFIX + new_suffix)
        self.suffix = new_suffix

    def delete_files(self) -> None:
        self.close_file()
        self._is_dirty = False
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._log_file)
        self.offset_index.delete_if_exists()
        self.time_index.delete_if_exists()
        self.txn_index.delete_if_exists()

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self._size})"


def roll_jitter_ms(config: LogConfig) -> int:
    """Fixed per segment at creation: 0, or a random value below min(segment.jitter.ms, segment.ms)."""
    if config.segment_jitter_ms <= 0:
        return 0
    return random.randrange(min(config.segment_jitter_ms, config.segment_ms))

"""Segment index files: ``IndexFile``, the file handling every index shares, and ``AbstractIndex``, the lazy
fixed-width index under the offset and time indexes.

Kafka splits ``AbstractIndex`` (file, preallocation, trim, resize) and ``LazyIndex`` (no I/O until first
use); here one base class does both, entries live in memory and the file is written with ``pwrite``. Kafka's
``TransactionIndex`` stands alone; here it shares ``IndexFile`` (flush, rename, delete, release).

No index keeps a descriptor open (Kafka keeps none either: its indexes are memory-mapped and their files
closed). Each write, trim or fsync opens the file for that call and closes it; an fsync through a new
descriptor syncs the file's data whichever descriptor wrote it. So a segment costs at most its ``.log``
descriptor, and a sealed one none (see ``LogSegment``).
"""

from __future__ import annotations

import errno
import os
import struct
from abc import ABC, abstractmethod
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, NamedTuple

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.atomic import fsync_file

__all__ = [
    "DEFAULT_MAX_INDEX_SIZE",
    "AbstractIndex",
    "IndexFile",
    "check_index_file_length",
    "check_listed_index_length",
    "check_whole_entries",
    "listed_index_length_passes",
    "read_whole_file",
]

DEFAULT_MAX_INDEX_SIZE = 10_485_760  # segment.index.bytes
_INT32_MAX = (1 << 31) - 1


def check_whole_entries(length: int, entry_size: int, *, kind: str, path: str | None) -> None:
    """Raise CorruptDataError, at the partial entry, unless ``length`` bytes are whole entries."""
    if length % entry_size:
        raise CorruptDataError(
            f"{kind} length {length} is not a multiple of {entry_size}",
            path=path,
            position=length - length % entry_size,
        )


class IndexFile(ABC):
    """The file under a segment index: its path and whether what was written to it still needs an fsync.

    No descriptor is kept: each write opens the file for that write (``_pwrite``, ``_truncate_file``) and
    ``flush`` opens it to fsync. ``flush``, ``close``, ``rename_to`` and ``delete_if_exists`` never create
    the file. Releasing it calls ``_forget``, where a subclass drops what it holds in memory; the next
    access reads the file again. Not thread-safe: the segment owner locks.

    The path is kept as a string (``_file``), which every system call takes; the ``Path`` object is built
    only when asked for. A broker loads about three index files per segment, 300,000 for 100,000 segments,
    and building a ``Path`` for each was a third of the start-up time. ``__slots__`` throughout: no
    per-instance dict for the garbage collector to walk at 100,000 segments.
    """

    __slots__ = ("_dirty", "_file", "_path_object")

    def __init__(self, path: Path | str) -> None:
        self._file = os.fspath(path)
        self._path_object = path if isinstance(path, Path) else None
        self._dirty = False  # written since the last fsync

    @abstractmethod
    def _forget(self) -> None:
        """Drop the entries held in memory (the descriptor is already released)."""

    @property
    def path(self) -> Path:
        return self._path

    @property
    def _path(self) -> Path:
        if self._path_object is None:
            self._path_object = Path(self._file)
        return self._path_object

    def flush(self) -> None:
        """fsync what this index wrote; a no-op if it wrote nothing since the last flush."""
        if self._dirty:
            fsync_file(self._file)
        self._dirty = False

    def close(self) -> None:
        """fsync and release the file; a later access reloads it."""
        try:
            self.flush()
        finally:
            self._release()

    def unload(self) -> None:
        """Drop what is held in memory without an fsync (a pending one stays pending for ``flush``)."""
        self._release()

    def rename_to(self, new_path: Path | str) -> None:
        """Rename the file if it exists; otherwise only remember the new path (it is created there)."""
        new_file = os.fspath(new_path)
        if os.path.exists(self._file):
            os.replace(self._file, new_file)
        self._file = new_file
        self._path_object = new_path if isinstance(new_path, Path) else None

    def delete_if_exists(self) -> bool:
        """Release and delete the file; False if there was none."""
        self._release()
        self._dirty = False
        try:
            os.unlink(self._file)
        except FileNotFoundError:
            return False
        return True

    def _pwrite(self, raw: bytes, position: int, *, create: bool = False) -> None:
        """Write all of ``raw`` at ``position`` (a short write is an EIO OSError) and mark it for fsync.

        The descriptor lives for this call only; ``create`` makes the file if it is missing.
        """
        flags = os.O_WRONLY | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        fd = os.open(self._file, flags, 0o644)
        try:
            written = os.pwrite(fd, raw, position)
        finally:
            os.close(fd)
        if written != len(raw):
            raise OSError(errno.EIO, f"short write: {written} of {len(raw)} bytes", str(self._path))
        self._dirty = True

    def _truncate_file(self, length: int) -> None:
        """Set the file's length (it must exist) and mark it for fsync."""
        os.truncate(self._file, length)
        self._dirty = True

    def discard(self) -> None:
        """Drop what is held in memory and write nothing: the file is being deleted, or its dir failed."""
        self._dirty = False
        self._release()

    def _release(self) -> None:
        """Drop what is held in memory; a pending fsync stays pending (``flush`` reopens the file)."""
        self._forget()


_UNLOADED_COLUMNS: tuple[array[int], array[int]] = (array("q"), array("q"))


class _Edges(NamedTuple):
    """File length and the first and last entries as stored (relative offsets); None when empty."""

    length: int
    first: tuple[int, int] | None
    last: tuple[int, int] | None


class AbstractIndex(IndexFile):
    """A fixed-width-entry index file, opened lazily (Kafka ``AbstractIndex`` + ``LazyIndex``).

    States: *unloaded* (the constructor does no I/O; the file may or may not exist) → *loaded* (all
    entries in memory) → *unloaded* again after ``close``/``delete_if_exists``. Reading or changing entries
    loads the index; if its file is missing, a writable index creates it preallocated to ``max_index_size``
    rounded down to whole entries (zero-filled), a read-only one reads as empty. ``entries``, ``max_entries``,
    ``last_*`` and ``sanity_check`` on an unloaded existing file read only its length and its first and last
    entries.

    An existing file's whole length counts as entries (``length // entry_size``) and as capacity, so a
    reopened trimmed index is full until ``resize``; the loader re-preallocates the active segment's.

    Appended entries are held in memory and written to the file, in one ``pwrite``, by ``flush``,
    ``resize`` (so by every trim), ``close`` and ``unload``: no descriptor stays open between appends.
    What a crash leaves is as before: entries appended since the segment's last flush are above the
    recovery point, whose segments recovery rebuilds. Not thread-safe: the segment owner locks.
    """

    __slots__ = (
        "_base_offset",
        "_columns",
        "_edges",
        "_file_length",
        "_loaded",
        "_max_index_size",
        "_writable",
        "_written",
    )

    entry_size: ClassVar[int]
    kind: ClassVar[str]  # "offset index" or "time index", for messages
    _entry: ClassVar[struct.Struct]  # the entry layout, two fields
    _typecodes: ClassVar[tuple[str, str]]  # array typecodes of the two in-memory columns

    def __init__(self, path: Path | str, base_offset: int, max_index_size: int, writable: bool) -> None:
        if base_offset < 0:
            raise InvalidInputError(f"{path}: base offset must be >= 0, got {base_offset}")
        if max_index_size < self.entry_size:
            raise InvalidInputError(
                f"{path}: max index size must hold one {self.entry_size}-byte entry, got {max_index_size}"
            )
        super().__init__(path)
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._loaded = False
        self._file_length = 0  # bytes on disk while loaded, counting the entries not yet written
        self._written = 0  # leading entries in memory that are also in the file
        self._edges: _Edges | None = None  # cached tail read of an unloaded file
        # The entries as stored (offsets relative), one array per field: columns[0][n], columns[1][n].
        # Unloaded, it is the shared empty pair, never appended to: ``_load`` puts fresh arrays in first.
        # Two arrays and a tuple per index were most of the objects the garbage collector walked at start-up.
        self._columns: tuple[array[int], array[int]] = _UNLOADED_COLUMNS

    @staticmethod
    @abstractmethod
    def _decode_columns(data: memoryview, count: int) -> tuple[array[int], array[int]]:
        """The first ``count`` entries of ``data``, one array per field."""

    # -- properties -------------------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    @property
    def is_writable(self) -> bool:
        return self._writable

    @property
    def is_loaded(self) -> bool:
        """True once the entries are in memory (Kafka ``LazyIndex.isLoaded``)."""
        return self._loaded

    @property
    def entries(self) -> int:
        """Number of entries; like every read, creates the file of a missing writable index."""
        edges = self._peek(create=True)
        return self._count() if self._loaded else edges.length // self.entry_size

    @property
    def max_entries(self) -> int:
        return self._peek(create=True).length // self.entry_size

    @property
    def size_in_bytes(self) -> int:
        """Bytes the entries use (``entries * entry size``), not the preallocated file length."""
        return self.entries * self.entry_size

    # -- file lifecycle ---------------------------------------------------------------------------

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries; True if it changed."""
        self._require_writable()
        self._load()
        self._write_pending()
        rounded = new_size // self.entry_size * self.entry_size
        used = self._count() * self.entry_size
        if rounded < used:
            raise InvalidInputError(
                f"{self._path}: cannot resize to {new_size} bytes; the {self._count()} entries use {used}"
            )
        if rounded == self._file_length:
            return False
        if rounded > self._file_length:
            # Preallocation needs no fsync: a crash leaves either length, and both read correctly (zero
            # slots count as entries until recovery rebuilds the index).
            os.truncate(self._file, rounded)
        else:
            self._truncate_file(rounded)  # a trim must be durable before the clean-shutdown marker is written
        self._file_length = rounded
        return True

    def load(self) -> None:
        """Read the entries into memory now (as the first lookup would); a missing file is created."""
        self._load()

    def load_bytes(self, data: bytes) -> None:
        """``load`` from ``data``, the file's whole content as the caller read it (a prescan,
        ``service.storage.prescan``): what ``load`` would read from the file, not read again."""
        if self._loaded:
            return
        self._file_length = len(data)
        self._columns = self._decode_columns(memoryview(data), len(data) // self.entry_size)
        self._written = self._count()
        self._loaded = True
        self._edges = None

    def prime_edges(self, data: bytes) -> None:
        """Keep the length and the first and last entries of ``data``, the file's whole content as the caller
        read it (a prescan), for the checks and ``last_*`` of an unloaded index: what they would read from
        the file (``_read_edges``), not read again. No effect once loaded."""
        if self._loaded:
            return
        count = len(data) // self.entry_size
        if count == 0:
            self._edges = _Edges(len(data), None, None)
            return
        first = self._entry.unpack_from(data, 0)
        last = self._entry.unpack_from(data, (count - 1) * self.entry_size)
        self._edges = _Edges(len(data), (first[0], first[1]), (last[0], last[1]))

    def prime_edge_entries(self, length: int, data: bytes) -> None:
        """Keep ``length`` and the first and last entries in ``data`` (the first entry, then the last one if
        the file holds more than one, as a prescan read them) for the checks and ``last_*`` of an unloaded
        index, as ``prime_edges`` does. Bytes that cannot be those of a file of ``length`` are ignored: the
        file is read then. No effect once loaded."""
        size = self.entry_size
        if self._loaded or length < 0 or length % size or len(data) != min(length, 2 * size):
            return
        if not data:
            self._edges = _Edges(length, None, None)
            return
        first = self._entry.unpack_from(data, 0)
        last = self._entry.unpack_from(data, len(data) - size)
        self._edges = _Edges(length, (first[0], first[1]), (last[0], last[1]))

    def check_file_length(self, *, must_exist: bool) -> None:
        """``check_index_file_length`` on this index's file (see there)."""
        check_index_file_length(self._file, type(self), must_exist=must_exist)

    def trim_to_valid_size(self) -> None:
        """Cut the preallocated tail off: file length = entries * entry size (on roll and close)."""
        self._load()
        self.resize(self._count() * self.entry_size)

    def truncate(self) -> None:
        """Remove every entry (the file keeps its length until trimmed)."""
        self._require_writable()
        self._load(read_entries=False)
        self._keep(0)

    def reset(self) -> None:
        """Remove every entry and preallocate again (Kafka ``reset``, used before a rebuild)."""
        self.truncate()
        self.resize(self._max_index_size)

    def flush(self) -> None:
        """Write the entries held only in memory, then fsync."""
        self._write_pending()
        super().flush()

    def close(self) -> None:
        """Trim (if writable and loaded), fsync and release the file; a later access reloads it."""
        try:
            if self._loaded and self._writable:
                self.trim_to_valid_size()
            self.flush()
        finally:
            self._release()

    def unload(self) -> None:
        """Trim (if writable and loaded) and drop the entries from memory, as a clean load leaves an index.

        Unlike ``close`` it does not fsync: a pending fsync stays pending for the segment's next ``flush``.
        """
        if self._loaded and self._writable:
            self.trim_to_valid_size()
        self._release()

    def __repr__(self) -> str:
        name, path = type(self).__name__, str(self._path)
        return f"{name}({path!r}, base_offset={self._base_offset}, loaded={self._loaded})"

    # -- helpers ----------------------------------------------------------------------------------

    def _relative_offset(self, offset: int) -> int:
        relative = offset - self._base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise InvalidInputError(
                f"{self._path}: offset {offset} is outside [{self._base_offset}, "
                f"{self._base_offset + _INT32_MAX}], the range a 4-byte relative offset can hold"
            )
        return relative

    def _require_writable(self) -> None:
        if not self._writable:
            raise InvalidInputError(f"{self._path}: the index was opened read-only (writable=False)")

    def _load(self, *, read_entries: bool = True) -> None:
        """Bring the entries into memory (or, with ``read_entries=False``, only the file length)."""
        if self._loaded:
            return
        self._columns = (array(self._typecodes[0]), array(self._typecodes[1]))
        try:
            data = read_whole_file(self._file) if read_entries else None
            length = os.stat(self._file).st_size if data is None else len(data)
        except FileNotFoundError:
            self._file_length = 0
            if self._writable:
                self._create_preallocated()
        else:
            self._file_length = length
            if data is not None:
                self._columns = self._decode_columns(memoryview(data), length // self.entry_size)
        self._written = self._count()
        self._loaded = True
        self._edges = None

    def _create_preallocated(self) -> None:
        length = self._max_index_size // self.entry_size * self.entry_size
        fd = os.open(self._file, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            os.ftruncate(fd, length)
        except BaseException:
            self._path.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)
        self._file_length, self._dirty = length, True

    def _write_pending(self) -> None:
        """Write the entries appended since the last write-out, in one ``pwrite``."""
        count = self._count()
        if not self._loaded or self._written >= count:
            return
        first, second = self._columns
        entry = self._entry
        raw = b"".join(map(entry.pack, first[self._written : count], second[self._written : count]))
        self._pwrite(raw, self._written * self.entry_size)
        self._written = count

    def _forget(self) -> None:
        self._loaded = False
        self._columns = _UNLOADED_COLUMNS
        self._file_length = 0
        self._written = 0
        self._edges = None

    def _peek(self, *, create: bool) -> _Edges:
        """Length and first/last entries: from memory, else read from the file without loading it."""
        if not self._loaded:
            if self._edges is None:
                self._edges = self._read_edges()
            if self._edges is not None:
                return self._edges
            if not (create and self._writable):
                return _Edges(0, None, None)
            self._load()
        count = self._count()
        if count == 0:
            return _Edges(self._file_length, None, None)
        return _Edges(self._file_length, self._stored(0), self._stored(count - 1))

    def _read_edges(self) -> _Edges | None:
        try:
            fd = os.open(self._file, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            length = os.fstat(fd).st_size
            count = length // self.entry_size
            if count == 0:
                return _Edges(length, None, None)
            if count == 1:  # one entry (an idle active segment's, often): first and last in one read
                first = self._pread(fd, 0)
                return _Edges(length, first, first)
            return _Edges(length, self._pread(fd, 0), self._pread(fd, (count - 1) * self.entry_size))
        finally:
            os.close(fd)

    def _pread(self, fd: int, position: int) -> tuple[int, int]:
        raw = os.pread(fd, self.entry_size, position)
        if len(raw) != self.entry_size:
            raise CorruptDataError(
                f"file shrank while reading: {len(raw)} of {self.entry_size} entry bytes",
                path=self._file,
                position=position,
            )
        first, second = self._entry.unpack(raw)
        return first, second

    def _count(self) -> int:
        return len(self._columns[0])

    def _keep(self, count: int) -> None:
        for column in self._columns:
            del column[count:]
        self._written = min(self._written, count)

    def _stored(self, slot: int) -> tuple[int, int]:
        return self._columns[0][slot], self._columns[1][slot]

    def _entry_at(self, n: int) -> tuple[int, int]:
        self._load()
        if not 0 <= n < self._count():
            raise InvalidInputError(f"{self._path}: entry {n} requested; the index has {self._count()}")
        return self._stored(n)

    def _write_entry(self, first: int, second: int) -> None:
        """Add the entry to memory; ``_write_pending`` writes it to its slot (the file grows if need be)."""
        self._require_writable()
        self._columns[0].append(first)
        self._columns[1].append(second)
        self._file_length = max(self._file_length, self._count() * self.entry_size)

    def _write_entries(self, first: Sequence[int], second: Sequence[int]) -> None:
        """``_write_entry`` of each pair, checked already by the caller."""
        self._require_writable()
        self._columns[0].extend(first)
        self._columns[1].extend(second)
        self._file_length = max(self._file_length, self._count() * self.entry_size)


def check_index_file_length(file: str, index_type: type[AbstractIndex], *, must_exist: bool) -> None:
    """Kafka's load-time check of an index file, one ``os.stat``: it exists (if ``must_exist``), and holds
    whole entries of ``index_type`` only; raises FileNotFoundError or CorruptDataError, either of which makes
    the loader rebuild the segment.

    Unlike ``sanity_check`` it reads no entry: after a clean shutdown Kafka 3.x checks only that the offset
    index exists, since "we will recover the segments above the recovery point in recoverLog() in any
    case"; the length check adds what a stat gives for free (Kafka's lazy index would silently drop a
    partial entry). It takes a file name, not an index, so that the loader need not build index objects.
    """
    try:
        length = os.stat(file).st_size
    except FileNotFoundError:
        if must_exist:
            raise FileNotFoundError(f"{index_type.kind} {file} is missing") from None
        return
    check_whole_entries(length, index_type.entry_size, kind=index_type.kind, path=file)


def listed_index_length_passes(
    length: int | None, index_type: type[AbstractIndex], *, must_exist: bool
) -> bool:
    """Whether ``check_listed_index_length`` passes on ``length`` without the file (no name needed)."""
    if length is None:
        return not must_exist
    return length >= 0 and not length % index_type.entry_size


def check_listed_index_length(
    file: str, length: int | None, index_type: type[AbstractIndex], *, must_exist: bool
) -> None:
    """``check_index_file_length`` with the length a listing of the dir gave (a prescan, made under the log
    dir's lock): None when the listing has no such file, -1 when its ``stat`` failed (the file is then
    checked as ``check_index_file_length`` does, which raises what that ``stat`` raises)."""
    if listed_index_length_passes(length, index_type, must_exist=must_exist):
        return
    if length is None:
        raise FileNotFoundError(f"{index_type.kind} {file} is missing")
    if length < 0:
        check_index_file_length(file, index_type, must_exist=must_exist)
        return
    check_whole_entries(length, index_type.entry_size, kind=index_type.kind, path=file)


def read_whole_file(file: str) -> bytes:
    """The file's bytes through a bare descriptor: open, fstat, read, close (no buffered file object)."""
    fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        remaining = os.fstat(fd).st_size
        while remaining > 0 and (chunk := os.read(fd, remaining)):
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)

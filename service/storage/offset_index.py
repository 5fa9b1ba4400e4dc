"""The offset index (``.index``): from offset to the byte position of its batch in the segment's ``.log``."""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from pathlib import Path
from sys import byteorder
from typing import NamedTuple

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.index_file import DEFAULT_MAX_INDEX_SIZE, AbstractIndex, check_whole_entries

__all__ = [
    "ENTRY_SIZE",
    "OffsetIndex",
    "OffsetPosition",
    "decode_entries",
    "encode_entries",
]

ENTRY_SIZE = 8
_INT32_MAX = (1 << 31) - 1
_ENTRY = struct.Struct(">ii")  # relative offset, position
if array("i").itemsize != 4:  # the bulk decoder reads the file as an array of 4-byte ints
    raise ImportError("offset_index needs array('i') to be 4 bytes wide")


class OffsetPosition(NamedTuple):
    offset: int  # absolute
    position: int  # byte position of the batch in the .log file


class OffsetIndex(AbstractIndex):
    """Sparse map from offset to byte position in the segment's ``.log`` (Kafka ``OffsetIndex``).

    On disk: entries back to back, no header, each 8 bytes big-endian::

        int32 relative offset   (offset - base offset; 0 .. 2^31-1)
        int32 position          (byte position in the .log of the batch whose last offset this is)

    Offsets strictly increase. ``lookup(t)`` gives the entry with the largest offset ≤ t, or
    ``(base_offset, 0)``; the reader scans batches forward from there.

    Size: a writable file is created preallocated to ``max_index_size`` rounded down to a multiple of 8
    (zero-filled) and trimmed to ``entries * 8`` on roll and close. Full when ``entries >= max_entries``.

    Crash behaviour: after a crash the file may still be preallocated; reopening counts its whole length as
    entries, zero slots included (as Kafka does), and ``sanity_check`` cannot tell. Recovery of an unclean
    shutdown rebuilds the indexes of every segment from the recovery point on (which includes the active
    one). Truncation changes only memory until the file is trimmed, so stale entries also survive a crash.
    """

    __slots__ = ()
    entry_size = ENTRY_SIZE
    kind = "offset index"
    _entry = _ENTRY
    _typecodes = ("i", "i")  # columns: relative offsets, positions

    def __init__(
        self,
        path: Path | str,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, writable)

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset if there is none."""
        last = self._peek(create=True).last
        return self._base_offset if last is None else self._base_offset + last[0]

    def is_full(self) -> bool:
        if self._loaded:  # the entries and the file length in memory (a cleaned segment's, per append)
            return self._count() >= self._file_length // ENTRY_SIZE
        return self.entries >= self.max_entries

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``; ``offset`` must exceed the last one and the index must not be full."""
        self._require_writable()
        self._load()
        relative = self._relative_offset(offset)
        if not 0 <= position <= _INT32_MAX:
            raise InvalidInputError(f"{self._path}: position {position} is outside [0, {_INT32_MAX}]")
        relatives = self._columns[0]
        if len(relatives) >= self._file_length // ENTRY_SIZE:
            raise InvalidInputError(
                f"{self._path}: cannot append to a full index ({len(relatives)} entries in "
                f"{self._file_length} bytes); roll the segment or resize the index"
            )
        if relatives and relative <= relatives[-1]:
            raise InvalidInputError(
                f"{self._path}: offset {offset} appended to slot {len(relatives)} is not larger than the "
                f"last offset {self._base_offset + relatives[-1]}"
            )
        self._write_entry(relative, position)

    def append_many(self, offsets: Sequence[int], positions: Sequence[int]) -> None:
        """``append`` of each pair in turn, with the same checks, in one call: all are added or none."""
        self._require_writable()
        self._load()
        relatives = self._columns[0]
        if len(relatives) + len(offsets) > self._file_length // ENTRY_SIZE:
            raise InvalidInputError(
                f"{self._path}: cannot append {len(offsets)} entries to an index holding {len(relatives)} in "
                f"{self._file_length} bytes; roll the segment or resize the index"
            )
        last = relatives[-1] if relatives else -1
        added: list[int] = []
        for offset, position in zip(offsets, positions, strict=True):
            relative = self._relative_offset(offset)
            if not 0 <= position <= _INT32_MAX:
                raise InvalidInputError(f"{self._path}: position {position} is outside [0, {_INT32_MAX}]")
            if relative <= last:
                raise InvalidInputError(
                    f"{self._path}: offset {offset} appended to slot {len(relatives) + len(added)} is not "
                    f"larger than the last offset {self._base_offset + last}"
                )
            added.append(relative)
            last = relative
        self._write_entries(added, positions)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset ≤ ``target_offset``, else ``(base_offset, 0)``."""
        self._load()
        relatives, positions = self._columns
        slot = bisect_right(relatives, target_offset - self._base_offset) - 1
        if slot < 0:
            return OffsetPosition(self._base_offset, 0)
        return OffsetPosition(self._base_offset + relatives[slot], positions[slot])

    def entry(self, n: int) -> OffsetPosition:
        relative, position = self._entry_at(n)
        return OffsetPosition(self._base_offset + relative, position)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ≥ ``offset``."""
        self._require_writable()
        self._load()
        self._keep(bisect_left(self._columns[0], offset - self._base_offset))

    def sanity_check(self) -> None:
        """Raise CorruptDataError if the length is not whole entries or the last offset is below the base."""
        length, _, last = self._peek(create=False)
        check_whole_entries(length, ENTRY_SIZE, kind="offset index", path=self._file)
        if last is not None and last[0] < 0:
            raise CorruptDataError(
                f"last offset {self._base_offset + last[0]} is below the base offset {self._base_offset}",
                path=self._file,
                position=length - ENTRY_SIZE,
            )

    @staticmethod
    def _decode_columns(data: memoryview, count: int) -> tuple[array[int], array[int]]:
        return _decode_columns(data, count)


def _decode_columns(data: memoryview, count: int) -> tuple[array[int], array[int]]:
    """The first ``count`` entries as (relative offsets, positions), decoded in bulk."""
    words = array("i")
    words.frombytes(data[: count * ENTRY_SIZE])
    if byteorder == "little":
        words.byteswap()
    return words[0::2], words[1::2]


def encode_entries(entries: Iterable[tuple[int, int]], base_offset: int = 0) -> bytes:
    """``(offset, position)`` pairs with absolute offsets → index file bytes."""
    out = bytearray()
    for offset, position in entries:
        relative = offset - base_offset
        if not (0 <= relative <= _INT32_MAX and 0 <= position <= _INT32_MAX):
            raise InvalidInputError(
                f"entry (offset {offset}, position {position}) does not fit base offset {base_offset}: "
                f"relative offset and position must be in [0, {_INT32_MAX}]"
            )
        out += _ENTRY.pack(relative, position)
    return bytes(out)


def decode_entries(data: bytes, base_offset: int = 0, *, path: str | None = None) -> list[OffsetPosition]:
    """Index file bytes → entries with absolute offsets. Checks the length only, as Kafka's loader does."""
    check_whole_entries(len(data), ENTRY_SIZE, kind="offset index", path=path)
    relative, positions = _decode_columns(memoryview(data), len(data) // ENTRY_SIZE)
    return [OffsetPosition(base_offset + r, p) for r, p in zip(relative, positions, strict=True)]

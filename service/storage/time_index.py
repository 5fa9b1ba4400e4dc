"""The time index (``.timeindex``): from timestamp to the offset after which larger timestamps lie."""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.index_file import DEFAULT_MAX_INDEX_SIZE, AbstractIndex, check_whole_entries

__all__ = [
    "ENTRY_SIZE",
    "NO_TIMESTAMP",
    "TimeIndex",
    "TimestampOffset",
    "decode_entries",
    "encode_entries",
]

ENTRY_SIZE = 12
NO_TIMESTAMP = -1
_INT32_MAX = (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_CHUNK_ENTRIES = 1024  # the bulk decoder unpacks this many entries per call
_CHUNK = struct.Struct(">" + "qi" * _CHUNK_ENTRIES)


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int  # absolute


class TimeIndex(AbstractIndex):
    """Kafka ``TimeIndex``: (max timestamp so far, offset of the batch holding it), sampled with the offsets.

    On disk: entries back to back, no header, each 12 bytes big-endian::

        int64 timestamp         (largest timestamp in the segment when the entry was written)
        int32 relative offset   (last offset of the batch holding it, minus the base offset)

    Timestamps strictly increase: ``append`` writes only a timestamp above the last one (above -1 when
    empty), so segments whose records carry no timestamp keep an empty time index. Offsets never decrease.
    ``lookup(ts)`` gives the entry with the largest timestamp ≤ ts, or ``(-1, base_offset)``.

    Roll and close append one more entry with ``skip_full_check=True``; it is how a segment's largest
    timestamp is known after a restart (``last_entry`` reads only the file's last 12 bytes). Hence the last
    slot is reserved: full when ``entries >= max_entries - 1``.

    Size: created preallocated to ``max_index_size`` rounded down to a multiple of 12 (default 10 MiB ⇒
    10,485,756 bytes), trimmed to ``entries * 12`` on roll and close. Crash behaviour as for the offset
    index: an untrimmed file reads its zero slots as entries; recovery rebuilds it.
    """

    __slots__ = ()
    entry_size = ENTRY_SIZE
    kind = "time index"
    _entry = _ENTRY
    _typecodes = ("q", "i")  # columns: timestamps, relative offsets

    def __init__(
        self,
        path: Path | str,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, writable)

    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)``; reads only the tail of an unloaded file."""
        last = self._peek(create=True).last
        if last is None:
            return TimestampOffset(NO_TIMESTAMP, self._base_offset)
        return TimestampOffset(last[0], self._base_offset + last[1])

    @property
    def max_timestamp(self) -> int:
        """The last entry's timestamp: the segment's largest timestamp, -1 if none."""
        return self.last_entry().timestamp

    def is_full(self) -> bool:
        """Full one slot early: the last slot is kept for the roll/close entry."""
        if self._loaded:  # the entries and the file length in memory (a cleaned segment's, per append)
            return self._count() >= self._file_length // ENTRY_SIZE - 1
        return self.entries >= self.max_entries - 1

    def append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Append ``(timestamp, offset)`` if the timestamp exceeds the last one; True if it was written.

        Raises if the index is full (unless ``skip_full_check``; past the last slot the file grows by one
        entry) or ``offset`` is below the last entry's offset, whatever the timestamp (Kafka's order).
        """
        self._require_writable()
        self._load()
        relative = self._relative_offset(offset)
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            raise InvalidInputError(f"{self._path}: timestamp {timestamp} does not fit an int64")
        timestamps, relatives = self._columns
        count = len(timestamps)
        if not skip_full_check and count >= self._file_length // ENTRY_SIZE - 1:
            raise InvalidInputError(
                f"{self._path}: cannot append to a full time index ({count} entries in {self._file_length} "
                "bytes, last slot reserved); roll the segment or resize the index"
            )
        if count and relative < relatives[-1]:
            raise InvalidInputError(
                f"{self._path}: offset {offset} appended to slot {count} is below the last offset "
                f"{self._base_offset + relatives[-1]}"
            )
        if timestamp <= (timestamps[-1] if count else NO_TIMESTAMP):
            return False
        self._write_entry(timestamp, relative)
        return True

    def append_many(self, timestamps: Sequence[int], offsets: Sequence[int]) -> int:
        """``append`` of each pair in turn (an entry whose timestamp does not exceed the last one written is
        skipped), with the same checks, in one call: all are added or none. Returns how many were written.
        Raises unless there is room for every pair besides the reserved last slot."""
        self._require_writable()
        self._load()
        stamps, relatives = self._columns
        count = len(stamps)
        if count + len(timestamps) > self._file_length // ENTRY_SIZE - 1:
            raise InvalidInputError(
                f"{self._path}: cannot append {len(timestamps)} entries to a time index holding {count} in "
                f"{self._file_length} bytes (last slot reserved); roll the segment or resize the index"
            )
        last_timestamp = stamps[-1] if count else NO_TIMESTAMP
        last_relative = relatives[-1] if count else None
        added_stamps: list[int] = []
        added_relatives: list[int] = []
        for timestamp, offset in zip(timestamps, offsets, strict=True):
            relative = self._relative_offset(offset)
            if not _INT64_MIN <= timestamp <= _INT64_MAX:
                raise InvalidInputError(f"{self._path}: timestamp {timestamp} does not fit an int64")
            if last_relative is not None and relative < last_relative:
                raise InvalidInputError(
                    f"{self._path}: offset {offset} appended to slot {count + len(added_stamps)} is below "
                    f"the last offset {self._base_offset + last_relative}"
                )
            if timestamp <= last_timestamp:
                continue
            added_stamps.append(timestamp)
            added_relatives.append(relative)
            last_timestamp, last_relative = timestamp, relative
        self._write_entries(added_stamps, added_relatives)
        return len(added_stamps)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp ≤ ``target_timestamp``, else ``(-1, base_offset)``."""
        self._load()
        timestamps, relatives = self._columns
        slot = bisect_right(timestamps, target_timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self._base_offset)
        return TimestampOffset(timestamps[slot], self._base_offset + relatives[slot])

    def entry(self, n: int) -> TimestampOffset:
        timestamp, relative = self._entry_at(n)
        return TimestampOffset(timestamp, self._base_offset + relative)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is ≥ ``offset``."""
        self._require_writable()
        self._load()
        self._keep(bisect_left(self._columns[1], offset - self._base_offset))

    def sanity_check(self) -> None:
        """Raise CorruptDataError on a partial entry, last timestamp < first, or last offset < base."""
        length, first, last = self._peek(create=False)
        path, last_position = self._file, length - length % ENTRY_SIZE - ENTRY_SIZE
        check_whole_entries(length, ENTRY_SIZE, kind="time index", path=path)
        if first is None or last is None:
            return
        if last[0] < first[0]:
            raise CorruptDataError(
                f"last timestamp {last[0]} is below the first timestamp {first[0]}",
                path=path,
                position=last_position,
            )
        if last[1] < 0:
            raise CorruptDataError(
                f"last offset {self._base_offset + last[1]} is below the base offset {self._base_offset}",
                path=path,
                position=last_position,
            )

    @staticmethod
    def _decode_columns(data: memoryview, count: int) -> tuple[array[int], array[int]]:
        return _decode_columns(data, count)


def _decode_columns(data: memoryview, count: int) -> tuple[array[int], array[int]]:
    """The first ``count`` entries as (timestamps, relative offsets), unpacked a chunk at a time."""
    timestamps, relative = array("q"), array("i")
    full_chunks, rest = divmod(count, _CHUNK_ENTRIES)
    position = 0
    for _ in range(full_chunks):
        values = _CHUNK.unpack_from(data, position)
        timestamps.extend(values[0::2])
        relative.extend(values[1::2])
        position += _CHUNK.size
    if rest:
        values = struct.unpack_from(">" + "qi" * rest, data, position)
        timestamps.extend(values[0::2])
        relative.extend(values[1::2])
    return timestamps, relative


def encode_entries(entries: Iterable[tuple[int, int]], base_offset: int = 0) -> bytes:
    """``(timestamp, offset)`` pairs with absolute offsets → time index file bytes."""
    out = bytearray()
    for timestamp, offset in entries:
        relative = offset - base_offset
        if not (_INT64_MIN <= timestamp <= _INT64_MAX and 0 <= relative <= _INT32_MAX):
            raise InvalidInputError(
                f"entry (timestamp {timestamp}, offset {offset}) does not fit base offset {base_offset}: the "
                f"timestamp must be an int64 and the relative offset in [0, {_INT32_MAX}]"
            )
        out += _ENTRY.pack(timestamp, relative)
    return bytes(out)


def decode_entries(data: bytes, base_offset: int = 0, *, path: str | None = None) -> list[TimestampOffset]:
    """Time index file bytes → entries with absolute offsets. Checks the length only, as Kafka's loader."""
    check_whole_entries(len(data), ENTRY_SIZE, kind="time index", path=path)
    timestamps, relative = _decode_columns(memoryview(data), len(data) // ENTRY_SIZE)
    return [TimestampOffset(t, base_offset + r) for t, r in zip(timestamps, relative, strict=True)]

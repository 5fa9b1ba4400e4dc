"""The transaction index (``.txnindex``): one entry per aborted transaction whose ABORT marker it holds."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.index_file import IndexFile, check_whole_entries, read_whole_file

__all__ = [
    "CURRENT_VERSION",
    "ENTRY_SIZE",
    "AbortedTxn",
    "TransactionIndex",
    "TxnIndexSearchResult",
    "decode_entries",
    "encode_entries",
]

CURRENT_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, last stable offset
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction: data in [first_offset, last_offset), ABORT marker at ``last_offset``.

    Entry, 34 bytes big-endian: int16 version (0), int64 producer id, int64 first offset, int64 last offset
    (the ABORT marker's), int64 last stable offset (the LSO right after the abort completed).
    """

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        try:
            return _ENTRY.pack(
                CURRENT_VERSION,
                self.producer_id,
                self.first_offset,
                self.last_offset,
                self.last_stable_offset,
            )
        except struct.error as exc:
            raise InvalidInputError(f"{self} does not fit the entry: every field must be an int64") from exc

    @classmethod
    def decode(cls, data: bytes, *, path: str | None = None, position: int | None = None) -> AbortedTxn:
        if len(data) != ENTRY_SIZE:
            raise CorruptDataError(
                f"aborted-transaction entry is {len(data)} bytes, expected {ENTRY_SIZE}",
                path=path,
                position=position,
            )
        version, producer_id, first_offset, last_offset, last_stable_offset = _ENTRY.unpack(data)
        if version != CURRENT_VERSION:
            raise CorruptDataError(
                f"aborted-transaction entry has version {version}, expected {CURRENT_VERSION}",
                path=path,
                position=position,
            )
        return cls(producer_id, first_offset, last_offset, last_stable_offset)


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """Aborted transactions overlapping a fetch range; ``is_complete`` if later segments need no search."""

    aborted_txns: tuple[AbortedTxn, ...]
    is_complete: bool


def encode_entries(txns: Iterable[AbortedTxn]) -> bytes:
    return b"".join(txn.encode() for txn in txns)


def decode_entries(data: bytes, *, path: str | None = None) -> list[AbortedTxn]:
    """Whole-file bytes → entries; a partial entry or a version other than 0 is CorruptDataError."""
    check_whole_entries(len(data), ENTRY_SIZE, kind="transaction index", path=path)
    return [
        AbortedTxn.decode(data[position : position + ENTRY_SIZE], path=path, position=position)
        for position in range(0, len(data), ENTRY_SIZE)
    ]


class TransactionIndex(IndexFile):
    """Kafka ``TransactionIndex``: the aborted transactions whose ABORT marker lies in this segment.

    On disk: 34-byte ``AbortedTxn`` entries back to back, no header, ``last_offset`` strictly increasing.
    Not preallocated: the file is created on the first ``append`` (most segments never have one). The
    constructor does no I/O; the entries are read into memory on first use. ``append`` and ``truncate_to``
    write through (``pwrite``/``truncate``, each through a descriptor opened for the call); ``flush``
    fsyncs.

    Crash behaviour: an entry half-written by a crash leaves a partial tail, which ``sanity_check`` reports
    so that the loader rebuilds the segment. Not thread-safe: the segment owner locks.
    """

    __slots__ = ("_start_offset", "_txns")

    def __init__(self, path: Path | str, start_offset: int) -> None:
        super().__init__(path)
        self._start_offset = start_offset
        self._txns: list[AbortedTxn] | None = None

    @property
    def start_offset(self) -> int:
        return self._start_offset

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; its ``last_offset`` must exceed the previous one and not precede the start offset."""
        txns = self._load()
        if txn.last_offset < self._start_offset:
            raise InvalidInputError(
                f"{self._path}: aborted transaction {txn} ends below the start offset {self._start_offset}"
            )
        if txns and txn.last_offset <= txns[-1].last_offset:
            raise InvalidInputError(
                f"{self._path}: aborted transaction {txn} does not end after the last one, at offset "
                f"{txns[-1].last_offset}"
            )
        self._pwrite(txn.encode(), len(txns) * ENTRY_SIZE, create=True)
        txns.append(txn)

    def all_aborted(self) -> list[AbortedTxn]:
        return list(self._load())

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Entries with ``last_offset >= fetch_offset`` and ``first_offset < upper_bound_offset``."""
        return list(self.search_aborted(fetch_offset, upper_bound_offset).aborted_txns)

    def search_aborted(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """``collect_aborted`` plus Kafka's ``isComplete``: an entry's LSO reached the upper bound, so no
        later segment can hold a transaction starting below it."""
        found: list[AbortedTxn] = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(tuple(found), True)
        return TxnIndexSearchResult(tuple(found), False)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries from the first one whose ``last_offset`` is ≥ ``offset`` (write-through).

        At or below the start offset every entry goes, without reading the file (it may be corrupt).
        """
        if offset <= self._start_offset:
            self.truncate()
            return
        txns = self._load()
        keep = next((i for i, txn in enumerate(txns) if txn.last_offset >= offset), len(txns))
        if keep < len(txns):
            self._truncate_file(keep * ENTRY_SIZE)
            del txns[keep:]

    def truncate(self) -> None:
        """Remove every entry without reading the file (Kafka ``reset``); a file is cut to 0 bytes."""
        if os.path.exists(self._file):
            self._truncate_file(0)
        self._txns = []

    def sanity_check(self) -> None:
        """Raise CorruptDataError on a partial entry, a version other than 0, or a last offset below start."""
        try:
            data = read_whole_file(self._file)
        except FileNotFoundError:
            return
        for n, txn in enumerate(decode_entries(data, path=self._file)):
            if txn.last_offset < self._start_offset:
                raise CorruptDataError(
                    f"aborted transaction {txn} ends below the index start offset {self._start_offset}",
                    path=self._file,
                    position=n * ENTRY_SIZE,
                )

    def trim_to_valid_size(self) -> None:
        """Nothing to trim: the transaction index is never preallocated."""

    def __repr__(self) -> str:
        return f"TransactionIndex({str(self._path)!r}, start_offset={self._start_offset})"

    def _load(self) -> list[AbortedTxn]:
        if self._txns is None:
            try:
                data = read_whole_file(self._file)
            except FileNotFoundError:
                data = b""
            self._txns = decode_entries(data, path=self._file)
        return self._txns

    def _forget(self) -> None:
        self._txns = None

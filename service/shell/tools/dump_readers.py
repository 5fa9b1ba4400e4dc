"""What ``logcleaner dump`` reads: the kind of a file, and one reader per kind.

The kind of a file comes from its name (a ``.deleted``/``.cleaned``/``.swap`` suffix is looked through).
Each reader yields what it decodes, in file order, and a :class:`DumpProblem` wherever the bytes are bad,
so an operator sees everything up to (and, for a CRC mismatch, past) the damage. As in kafka-dump-log, a
batch whose CRC does not match is yielded with ``crc_valid`` False and reading goes on; a batch whose
framing is broken (length, magic) ends the file. ``.log`` files are read in chunks
(``iter_file_batches``), so a 1 GiB segment is never held whole; indexes are decoded 4096 entries at a time.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.checkpoints import decode_checkpoint
from service.storage.clean_shutdown import read_clean_shutdown_marker
from service.storage.file_records import iter_file_batches
from service.storage.leader_epoch_checkpoint import LEADER_EPOCH_CHECKPOINT, decode_leader_epoch_checkpoint
from service.storage.log_files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    CLEANER_OFFSET_CHECKPOINT,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    base_offset_from_name,
)
from service.storage.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from service.storage.offset_index import OffsetPosition
from service.storage.offset_index import decode_entries as decode_offset_entries
from service.storage.partition_metadata import PARTITION_METADATA_FILE, decode_partition_metadata
from service.storage.producer_snapshot import decode_snapshot
from service.storage.records import Record, RecordBatch, TimestampType, decode_records
from service.storage.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from service.storage.time_index import TimestampOffset
from service.storage.time_index import decode_entries as decode_time_entries
from service.storage.txn_index import CURRENT_VERSION as TXN_VERSION
from service.storage.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from service.storage.txn_index import AbortedTxn
from service.storage.varint import decode_varint

__all__ = [
    "BATCH_KINDS",
    "KINDS",
    "TEMP_SUFFIXES",
    "BatchDump",
    "DumpProblem",
    "Entry",
    "Item",
    "file_kind",
    "read_file",
]

# kind → what identifies it; the order is the one the error message lists.
KINDS: dict[str, str] = {
    "log": LOG_SUFFIX,
    "index": INDEX_SUFFIX,
    "timeindex": TIME_INDEX_SUFFIX,
    "txnindex": TXN_INDEX_SUFFIX,
    "checkpoint": (
        f"{RECOVERY_POINT_CHECKPOINT}, {LOG_START_OFFSET_CHECKPOINT}, {CLEANER_OFFSET_CHECKPOINT}, "
        f"{REPLICATION_OFFSET_CHECKPOINT}"
    ),
    "clean_shutdown": CLEAN_SHUTDOWN_FILE,
    "snapshot": SNAPSHOT_SUFFIX,
    "leader_epoch": LEADER_EPOCH_CHECKPOINT,
    "partition_metadata": PARTITION_METADATA_FILE,
    "metadata_snapshot": "<end offset>-<epoch>.checkpoint (a KRaft metadata snapshot)",
}
BATCH_KINDS = frozenset({"log", "metadata_snapshot"})  # files of record batches; the others hold entries
_METADATA_SNAPSHOT_NAME = re.compile(r"^[0-9]{20}-[0-9]{10}\.checkpoint$")
TEMP_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)  # looked through by file_kind
_CHECKPOINT_NAMES = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)
_INDEX_CHUNK_ENTRIES = 4096  # decoded at a time, so a preallocated 10 MiB index is not decoded whole

Entry = dict[str, int | str]


@dataclass(frozen=True, slots=True)
class DumpProblem:
    """Bad bytes (or an unreadable file): where (``position`` None = the file as a whole) and what."""

    position: int | None
    message: str

    def to_json(self) -> dict[str, object]:
        return {"position": self.position, "message": self.message}


@dataclass(frozen=True, slots=True)
class BatchDump:
    """A batch as dumped: ``records`` is None unless asked for, and holds what decoded if not all did."""

    batch: RecordBatch
    crc_valid: bool
    records: tuple[Record, ...] | None = None
    records_error: DumpProblem | None = None


Item = BatchDump | Entry | DumpProblem


class _JsonEntry(Protocol):
    """An entry of a small broker file (snapshot, leader epoch, partition metadata)."""

    def to_json(self) -> Entry: ...


def file_kind(path: Path) -> str | None:
    """The kind of file ``path`` names (a key of :data:`KINDS`), or None if dump cannot read it."""
    name = path.name
    for suffix in TEMP_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name in _CHECKPOINT_NAMES:
        return "checkpoint"
    if name == CLEAN_SHUTDOWN_FILE:
        return "clean_shutdown"
    if name == LEADER_EPOCH_CHECKPOINT:
        return "leader_epoch"
    if name == PARTITION_METADATA_FILE:
        return "partition_metadata"
    if _METADATA_SNAPSHOT_NAME.match(name):
        return "metadata_snapshot"
    for kind in ("log", "index", "timeindex", "txnindex", "snapshot"):
        if name.endswith(KINDS[kind]) and len(name) > len(KINDS[kind]):
            return kind
    return None


def read_file(path: Path, kind: str, *, with_records: bool = False) -> Iterator[Item]:
    """Everything ``path`` holds, in file order, with a DumpProblem where the bytes are bad."""
    readers: dict[str, Callable[[Path], Iterator[Item]]] = {
        "log": lambda p: _read_log(p, with_records=with_records),
        "metadata_snapshot": lambda p: _read_log(p, with_records=with_records),
        "index": lambda p: _read_index(p, OFFSET_ENTRY_SIZE, "offset index", decode_offset_entries),
        "timeindex": lambda p: _read_index(p, TIME_ENTRY_SIZE, "time index", decode_time_entries),
        "txnindex": _read_txn_index,
        "checkpoint": _read_checkpoint,
        "clean_shutdown": _read_clean_shutdown,
        "snapshot": _read_snapshot,
        "leader_epoch": _read_leader_epoch,
        "partition_metadata": _read_partition_metadata,
    }
    try:
        yield from readers[kind](path)
    except OSError as exc:
        yield DumpProblem(None, f"cannot read the file: {exc.strerror or exc}")


# -- one reader per kind -------------------------------------------------------------------------------


def _read_log(path: Path, *, with_records: bool) -> Iterator[Item]:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        try:
            for batch in iter_file_batches(fd, 0, size, path=str(path), verify_crc=False):
                yield from _dump_batch(batch, with_records=with_records)
        except CorruptDataError as exc:
            yield DumpProblem(exc.position, exc.reason)
    finally:
        os.close(fd)


def _dump_batch(batch: RecordBatch, *, with_records: bool) -> Iterator[Item]:
    crc_valid = batch.is_crc_valid()
    records: tuple[Record, ...] | None = None
    records_error = None
    if with_records:
        records, records_error = _decode_records_leniently(batch)
    yield BatchDump(batch, crc_valid, records, records_error)
    if not crc_valid:
        yield DumpProblem(
            batch.position, f"CRC mismatch: stored {batch.crc:#010x}, computed {batch.computed_crc():#010x}"
        )
    if records_error is not None:
        yield records_error


def _decode_records_leniently(batch: RecordBatch) -> tuple[tuple[Record, ...], DumpProblem | None]:
    """All records, or the ones before the first that does not decode, plus what went wrong."""
    try:
        return tuple(batch.records()), None
    except CorruptDataError as exc:
        problem = DumpProblem(exc.position, f"records of the batch at {batch.position}: {exc.reason}")
    try:
        raw = batch.records_bytes()
    except CorruptDataError:
        return (), problem
    log_append_time = batch.max_timestamp if batch.timestamp_type is TimestampType.LOG_APPEND_TIME else None
    salvaged: list[Record] = []
    pos = 0
    try:
        for _ in range(batch.records_count):
            length, body = decode_varint(raw, pos)
            if length < 0 or body + length > len(raw):
                break
            one = raw[pos : body + length]
            salvaged += decode_records(one, 1, batch.base_offset, batch.base_timestamp, log_append_time)
            pos = body + length
    except CorruptDataError:
        pass
    return tuple(salvaged), problem


def _read_index(
    path: Path,
    entry_size: int,
    what: str,
    decode: Callable[[bytes, int], Sequence[OffsetPosition | TimestampOffset]],
) -> Iterator[Item]:
    """Entries of an offset or time index, relative to the base offset in the file name, each as its
    fields by name (``{"offset": …, "position": …}``, ``{"timestamp": …, "offset": …}``).

    As kafka-dump-log does, an entry at the base offset after the first one ends the listing: it is a
    zero-filled slot of a preallocated (active or crashed) index, and so is everything after it.
    """
    try:
        base_offset = base_offset_from_name(path.name)
    except InvalidInputError:
        yield DumpProblem(None, f"the file name does not start with the base offset the {what} needs")
        return
    data = path.read_bytes()
    whole = len(data) - len(data) % entry_size
    step = entry_size * _INDEX_CHUNK_ENTRIES
    for start in range(0, whole, step):
        for n, entry in enumerate(
            decode(data[start : min(start + step, whole)], base_offset), start // entry_size
        ):
            if n > 0 and entry.offset == base_offset:
                return
            yield entry._asdict()
    yield from _partial_entry(len(data), whole, entry_size, what)


def _partial_entry(length: int, whole: int, entry_size: int, what: str) -> Iterator[Item]:
    if length != whole:
        yield DumpProblem(
            whole, f"{what} length {length} is not a multiple of {entry_size}: a partial entry at the end"
        )


def _read_txn_index(path: Path) -> Iterator[Item]:
    data = path.read_bytes()
    whole = len(data) - len(data) % TXN_ENTRY_SIZE
    for position in range(0, whole, TXN_ENTRY_SIZE):
        try:
            txn = AbortedTxn.decode(
                data[position : position + TXN_ENTRY_SIZE], path=str(path), position=position
            )
        except CorruptDataError as exc:
            yield DumpProblem(exc.position, exc.reason)
            return
        yield {
            "version": TXN_VERSION,
            "producer_id": txn.producer_id,
            "first_offset": txn.first_offset,
            "last_offset": txn.last_offset,
            "last_stable_offset": txn.last_stable_offset,
        }
    yield from _partial_entry(len(data), whole, TXN_ENTRY_SIZE, "transaction index")


def _read_checkpoint(path: Path) -> Iterator[Item]:
    try:
        entries = decode_checkpoint(path.read_bytes(), path=str(path))
    except CorruptDataError as exc:
        yield DumpProblem(exc.position, exc.reason)
        return
    for tp, offset in entries.items():
        yield {"topic": tp.topic, "partition": tp.partition, "offset": offset}


def _read_clean_shutdown(path: Path) -> Iterator[Item]:
    epoch = read_clean_shutdown_marker(path.parent)
    if epoch is None:
        raise FileNotFoundError(2, "No such file or directory", str(path))
    yield {"broker_epoch": epoch}


def _read_snapshot(path: Path) -> Iterator[Item]:
    return _read_entries(path, decode_snapshot)


def _read_leader_epoch(path: Path) -> Iterator[Item]:
    return _read_entries(path, decode_leader_epoch_checkpoint)


def _read_partition_metadata(path: Path) -> Iterator[Item]:
    return _read_entries(path, lambda data, path: [decode_partition_metadata(data, path=path)])


def _read_entries(path: Path, decode: Callable[..., Iterable[_JsonEntry]]) -> Iterator[Item]:
    """The JSON of each entry of a small broker file, or the problem that stops its decoding."""
    try:
        entries = list(decode(path.read_bytes(), path=str(path)))
    except CorruptDataError as exc:
        yield DumpProblem(exc.position, exc.reason)
        return
    for entry in entries:
        yield entry.to_json()

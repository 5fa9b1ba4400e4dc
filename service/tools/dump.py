"""``logcleaner dump``: print what Kafka's files hold, like ``kafka-dump-log.sh``, as text or JSON.

The kind of a file comes from its name (a ``.deleted``/``.cleaned``/``.swap`` suffix is looked through).
Each reader yields what it decodes, in file order, and a :class:`DumpProblem` wherever the bytes are bad,
so an operator sees everything up to (and, for a CRC mismatch, past) the damage. As in kafka-dump-log, a
batch whose CRC does not match is shown with ``isvalid: false`` and reading goes on; a batch whose framing
is broken (length, magic) ends the file. Any problem makes the command exit 2, after every file is done.

``.log`` files are read in chunks (``iter_file_batches``) and output is written as it is produced, so a
1 GiB segment needs neither 1 GiB of memory nor one huge string; the JSON document is streamed too.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from service.errors import CorruptDataError, InvalidInputError
from service.storage.checkpoints import decode_checkpoint, read_clean_shutdown_marker
from service.storage.control import ControlRecordType, decode_control_type, decode_end_txn_marker
from service.storage.file_records import iter_file_batches
from service.storage.log_files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    CLEANER_OFFSET_CHECKPOINT,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    RECOVERY_POINT_CHECKPOINT,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    base_offset_from_name,
)
from service.storage.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from service.storage.offset_index import decode_entries as decode_offset_entries
from service.storage.records import NO_SEQUENCE, Record, RecordBatch, TimestampType, decode_records
from service.storage.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from service.storage.time_index import decode_entries as decode_time_entries
from service.storage.txn_index import CURRENT_VERSION as TXN_VERSION
from service.storage.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from service.storage.txn_index import AbortedTxn
from service.storage.varint import decode_varint

__all__ = ["KINDS", "BatchDump", "DumpProblem", "dump_command", "file_kind", "read_file"]

# kind → what identifies it; the order is the one the error message lists.
KINDS: dict[str, str] = {
    "log": LOG_SUFFIX,
    "index": INDEX_SUFFIX,
    "timeindex": TIME_INDEX_SUFFIX,
    "txnindex": TXN_INDEX_SUFFIX,
    "checkpoint": f"{RECOVERY_POINT_CHECKPOINT}, {LOG_START_OFFSET_CHECKPOINT}, {CLEANER_OFFSET_CHECKPOINT}",
    "clean_shutdown": CLEAN_SHUTDOWN_FILE,
}
_CHECKPOINT_NAMES = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)
_TEMP_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
_INT32_MAX = (1 << 31) - 1
_FLUSH_CHARS = 1 << 16
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


def file_kind(path: Path) -> str | None:
    """The kind of file ``path`` names (a key of :data:`KINDS`), or None if dump cannot read it."""
    name = path.name
    for suffix in _TEMP_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name in _CHECKPOINT_NAMES:
        return "checkpoint"
    if name == CLEAN_SHUTDOWN_FILE:
        return "clean_shutdown"
    for kind in ("log", "index", "timeindex", "txnindex"):
        if name.endswith(KINDS[kind]) and len(name) > len(KINDS[kind]):
            return kind
    return None


def read_file(path: Path, kind: str, *, with_records: bool = False) -> Iterator[Item]:
    """Everything ``path`` holds, in file order, with a DumpProblem where the bytes are bad."""
    readers: dict[str, Callable[[Path], Iterator[Item]]] = {
        "log": lambda p: _read_log(p, with_records=with_records),
        "index": _read_offset_index,
        "timeindex": _read_time_index,
        "txnindex": _read_txn_index,
        "checkpoint": _read_checkpoint,
        "clean_shutdown": _read_clean_shutdown,
    }
    try:
        yield from readers[kind](path)
    except OSError as exc:
        yield DumpProblem(None, f"cannot read the file: {exc.strerror or exc}")


# -- readers ---------------------------------------------------------------------------------------


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


def _read_offset_index(path: Path) -> Iterator[Item]:
    yield from _read_index(
        path,
        OFFSET_ENTRY_SIZE,
        "offset index",
        lambda data, base: [
            {"offset": e.offset, "position": e.position} for e in decode_offset_entries(data, base)
        ],
    )


def _read_time_index(path: Path) -> Iterator[Item]:
    yield from _read_index(
        path,
        TIME_ENTRY_SIZE,
        "time index",
        lambda data, base: [
            {"timestamp": e.timestamp, "offset": e.offset} for e in decode_time_entries(data, base)
        ],
    )


def _read_index(
    path: Path, entry_size: int, what: str, decode: Callable[[bytes, int], list[Entry]]
) -> Iterator[Item]:
    """Entries of an offset or time index, relative to the base offset in the file name.

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
            if n > 0 and entry["offset"] == base_offset:
                return
            yield entry
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


# -- JSON shapes (CONTRACT §4) -------------------------------------------------------------------------


def batch_to_json(dump: BatchDump) -> dict[str, object]:
    """The contract's batch object, plus ``partition_leader_epoch``, ``records_count``, ``last_sequence``
    and ``crc`` (and ``records_error`` when the records do not all decode)."""
    batch = dump.batch
    out: dict[str, object] = {
        "position": batch.position,
        "base_offset": batch.base_offset,
        "last_offset": batch.last_offset,
        "size_bytes": batch.size_bytes,
        "magic": batch.magic,
        "crc_valid": dump.crc_valid,
        "compression": _codec_label(batch),
        "timestamp_type": batch.timestamp_type.label,
        "is_transactional": batch.is_transactional,
        "is_control": batch.is_control,
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "base_sequence": batch.base_sequence,
        "max_timestamp": batch.max_timestamp,
        "delete_horizon_ms": batch.delete_horizon_ms,
        "partition_leader_epoch": batch.partition_leader_epoch,
        "records_count": batch.records_count,
        "last_sequence": batch.last_sequence,
        "crc": batch.crc,
    }
    if dump.records is not None:
        out["records"] = [_record_to_json(record, batch) for record in dump.records]
    if dump.records_error is not None:
        out["records_error"] = dump.records_error.to_json()
    return out


def _record_to_json(record: Record, batch: RecordBatch) -> dict[str, object]:
    out: dict[str, object] = {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": _binary(record.key),
        "value": _binary(record.value),
        "headers": [{"key": h.key, "value": _binary(h.value)} for h in record.headers],
    }
    if batch.is_control:
        control_type, coordinator_epoch = _control_info(record)
        out["control_type"] = control_type
        if coordinator_epoch is not None:
            out["coordinator_epoch"] = coordinator_epoch
    return out


def _binary(data: bytes | None) -> dict[str, str] | None:
    if data is None:
        return None
    return {"type": "BINARY", "data": base64.b64encode(data).decode("ascii")}


def _codec_label(batch: RecordBatch) -> str:
    try:
        return batch.compression.label
    except ValueError:  # codec ids 5-7 are unassigned; show the id rather than fail the dump
        return f"unknown({batch.attributes & 0x07})"


def _control_info(record: Record) -> tuple[str, int | None]:
    """A control record's type name, and the coordinator epoch when it is a transaction marker."""
    try:
        control_type = decode_control_type(record.key)
    except CorruptDataError:
        return ControlRecordType.UNKNOWN.name, None
    if control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        return control_type.name, None
    try:
        return control_type.name, decode_end_txn_marker(record).coordinator_epoch
    except CorruptDataError:
        return control_type.name, None


# -- text shapes (kafka-dump-log's) ----------------------------------------------------------------


def _batch_line(dump: BatchDump) -> str:
    b = dump.batch
    horizon = "OptionalLong.empty" if b.delete_horizon_ms is None else f"OptionalLong[{b.delete_horizon_ms}]"
    return (
        f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.records_count} "
        f"baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} producerId: {b.producer_id} "
        f"producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.partition_leader_epoch} "
        f"isTransactional: {_flag(b.is_transactional)} isControl: {_flag(b.is_control)} "
        f"deleteHorizonMs: {horizon} position: {b.position} {b.timestamp_type.label}: {b.max_timestamp} "
        f"size: {b.size_bytes} magic: {b.magic} compresscodec: {_codec_label(b)} crc: {b.crc} "
        f"isvalid: {_flag(dump.crc_valid)}"
    )


def _record_line(record: Record, batch: RecordBatch) -> str:
    sequence = NO_SEQUENCE
    if batch.base_sequence != NO_SEQUENCE:
        sequence = (batch.base_sequence + record.offset - batch.base_offset) % (_INT32_MAX + 1)
    parts = [
        f"| offset: {record.offset} {batch.timestamp_type.label}: {record.timestamp}",
        f"keySize: {_size(record.key)} valueSize: {_size(record.value)} sequence: {sequence}",
        f"headerKeys: [{','.join(h.key for h in record.headers)}]",
    ]
    if batch.is_control:
        control_type, coordinator_epoch = _control_info(record)
        if coordinator_epoch is None:
            parts.append(f"controlType: {control_type}")
        else:
            parts.append(f"endTxnMarker: {control_type} coordinatorEpoch: {coordinator_epoch}")
    else:
        if record.key is not None:
            parts.append(f"key: {_show(record.key)}")
        if record.value is not None:
            parts.append(f"payload: {_show(record.value)}")
    return " ".join(parts)


def _entry_line(entry: Entry) -> str:
    """``producer_id`` → ``producerId: 7``: the JSON entry in kafka-dump-log's spelling."""
    return " ".join(f"{_camel(key)}: {value}" for key, value in entry.items())


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _show(data: bytes) -> str:
    """Mostly printable UTF-8 as text (bad bytes as U+FFFD), anything else as hex: one line either way."""
    text = data.decode("utf-8", errors="replace")
    bad = sum(1 for ch in text if ch == "\ufffd" or not ch.isprintable())
    if bad * 10 > len(text):
        return "0x" + data.hex()
    if bad:
        return "".join(ch if ch.isprintable() else "\ufffd" for ch in text)
    return text


# -- output ----------------------------------------------------------------------------------------


class _Output:
    """stdout through click.echo in ~64 KiB pieces: streamed, without one echo call per line."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._chars = 0

    def write(self, text: str) -> None:
        self._parts.append(text)
        self._chars += len(text)
        if self._chars >= _FLUSH_CHARS:
            self.flush()

    def flush(self) -> None:
        if self._parts:
            click.echo("".join(self._parts), nl=False)
            self._parts.clear()
            self._chars = 0


class _TextRenderer:
    def __init__(self) -> None:
        self._out = _Output()

    def begin_file(self, path: Path, kind: str) -> None:
        self._out.write(f"Dumping {path}\n")
        if kind == "log":
            # A name that is not a segment's (a copied file) has no starting offset to show.
            with contextlib.suppress(InvalidInputError):
                self._out.write(f"Log starting offset: {base_offset_from_name(path.name)}\n")

    def item(self, item: BatchDump | Entry) -> None:
        if isinstance(item, BatchDump):
            lines = [_batch_line(item)]
            lines.extend(_record_line(record, item.batch) for record in item.records or ())
            self._out.write("\n".join(lines) + "\n")
        else:
            self._out.write(_entry_line(item) + "\n")

    def problem(self, path: Path, problem: DumpProblem) -> None:
        self._out.flush()  # keep stdout and stderr in file order on a terminal
        where = str(path) if problem.position is None else f"{path}, position {problem.position}"
        click.echo(f"logcleaner: error: {where}: {problem.message}", err=True)

    def end_file(self, problems: Sequence[DumpProblem]) -> None:
        pass

    def finish(self) -> None:
        self._out.flush()


class _JsonRenderer:
    """One JSON document, written as the items come: ``{"files": [{..., "batches": [...]}, ...]}``."""

    def __init__(self) -> None:
        self._out = _Output()
        self._out.write('{"files": [')
        self._files = 0
        self._items = 0

    def begin_file(self, path: Path, kind: str) -> None:
        head = f'{{"path": {json.dumps(str(path))}, "kind": {json.dumps(kind)}, "batches": ['
        if kind != "log":
            head += '], "entries": ['
        self._out.write((", " if self._files else "") + head)
        self._files += 1
        self._items = 0

    def item(self, item: BatchDump | Entry) -> None:
        obj = batch_to_json(item) if isinstance(item, BatchDump) else item
        self._out.write((", " if self._items else "") + json.dumps(obj))
        self._items += 1

    def problem(self, path: Path, problem: DumpProblem) -> None:
        pass  # reported in end_file, after the items

    def end_file(self, problems: Sequence[DumpProblem]) -> None:
        tail = "]"
        if problems:
            tail += f', "error": {json.dumps(problems[0].to_json())}'
            if len(problems) > 1:
                tail += f', "errors": {json.dumps([p.to_json() for p in problems])}'
        self._out.write(tail + "}")

    def finish(self) -> None:
        self._out.write("]}\n")
        self._out.flush()


# -- the command -----------------------------------------------------------------------------------

_EXIT_CORRUPT = 2  # cli.py's "bad input" code; dump cannot import cli (cli imports dump)


def _require_kind(path: Path) -> str:
    kind = file_kind(path)
    if kind is None:
        supported = "; ".join(f"{k} ({what})" for k, what in KINDS.items())
        raise click.BadParameter(
            f"{path}: unknown file kind; dump reads {supported}, also with a "
            f"{'/'.join(_TEMP_SUFFIXES)} suffix",
            param_hint="FILE",
        )
    return kind


@click.command("dump")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--records", "with_records", is_flag=True, help="Also print every record of .log files.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def dump_command(files: tuple[Path, ...], with_records: bool, as_json: bool) -> int:
    """Print the batches (and records) of .log files and the entries of indexes and checkpoints.

    Like kafka-dump-log.sh. Reads .log, .index, .timeindex, .txnindex (also .deleted/.cleaned/.swap),
    the three offset checkpoint files and .kafka_cleanshutdown. Corrupt bytes: everything readable is
    printed, then the error with its position (stderr, or "error" in JSON); the exit code is 2.
    """
    kinds = [_require_kind(path) for path in files]
    renderer: _TextRenderer | _JsonRenderer = _JsonRenderer() if as_json else _TextRenderer()
    failed = False
    for path, kind in zip(files, kinds, strict=True):
        renderer.begin_file(path, kind)
        problems: list[DumpProblem] = []
        for item in read_file(path, kind, with_records=with_records):
            if isinstance(item, DumpProblem):
                problems.append(item)
                renderer.problem(path, item)
            else:
                renderer.item(item)
        renderer.end_file(problems)
        failed = failed or bool(problems)
    renderer.finish()
    return _EXIT_CORRUPT if failed else 0

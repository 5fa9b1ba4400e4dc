"""How ``logcleaner dump`` shows what it read: kafka-dump-log's text lines, or one JSON document.

Both renderers write as the items come, through one buffered stdout writer, so a 1 GiB segment needs
neither 1 GiB of memory nor one huge string; the JSON document is streamed too. Problems go to stderr,
one line each, in both modes, and in JSON also into the file's ``"error"`` (and ``"errors"``).
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from service.base.errors import CorruptDataError, InvalidInputError
from service.shell.tools.dump_readers import BATCH_KINDS, BatchDump, DumpProblem, Entry
from service.storage.control import ControlRecordType, decode_control_type, decode_end_txn_marker
from service.storage.coordinator_records import Decoded
from service.storage.log_files import base_offset_from_name
from service.storage.records import NO_SEQUENCE, Record, RecordBatch

__all__ = ["JsonRenderer", "RecordDecoder", "TextRenderer", "batch_to_json", "report_problem"]

# --offsets-decoder / --transaction-log-decoder: a record's key and value → {"key": ..., "value": ...}
RecordDecoder = Callable[[bytes | None, bytes | None], Decoded]

_INT32_MAX = (1 << 31) - 1
_FLUSH_CHARS = 1 << 16  # stdout is written in pieces of about this size


# -- JSON shapes -------------------------------------------------------------------------


def batch_to_json(dump: BatchDump, decoder: RecordDecoder | None = None) -> dict[str, object]:
    """The contract's batch object, plus ``partition_leader_epoch``, ``records_count``, ``last_sequence``
    and ``crc`` (and ``records_error`` when the records do not all decode); with a ``decoder``, each
    data record also has ``decoded``."""
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
        out["records"] = [_record_to_json(record, batch, decoder) for record in dump.records]
    if dump.records_error is not None:
        out["records_error"] = dump.records_error.to_json()
    return out


def _record_to_json(record: Record, batch: RecordBatch, decoder: RecordDecoder | None) -> dict[str, object]:
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
    elif decoder is not None:
        out["decoded"] = _jsonable(decoder(record.key, record.value))
    return out


def _jsonable(value: object) -> object:
    """A decoded record with its ``bytes`` as the contract's BINARY objects."""
    if isinstance(value, bytes):
        return _binary(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


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


def _record_line(record: Record, batch: RecordBatch, decoder: RecordDecoder | None) -> str:
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
    elif decoder is not None:  # kafka-dump-log's decoders: the key and payload as JSON
        decoded = decoder(record.key, record.value)
        key, payload = json.dumps(_jsonable(decoded["key"])), json.dumps(_jsonable(decoded["value"]))
        parts.append(f"key: {key} payload: {payload}")
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


def report_problem(path: Path, problem: DumpProblem) -> None:
    """One line on stderr naming the file and the byte position: the same in text and JSON mode."""
    where = str(path) if problem.position is None else f"{path}, position {problem.position}"
    click.echo(f"logcleaner: error: {where}: {problem.message}", err=True)


# -- renderers ----------------------------------------------------------------------------------------


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


class TextRenderer:
    """kafka-dump-log's text on stdout; each problem on stderr as it is found."""

    def __init__(self, decoder: RecordDecoder | None = None) -> None:
        self._out = _Output()
        self._decoder = decoder

    def begin_file(self, path: Path, kind: str) -> None:
        self._out.write(f"Dumping {path}\n")
        if kind == "log":
            # A name that is not a segment's (a copied file) has no starting offset to show.
            with contextlib.suppress(InvalidInputError):
                self._out.write(f"Log starting offset: {base_offset_from_name(path.name)}\n")

    def item(self, item: BatchDump | Entry) -> None:
        if isinstance(item, BatchDump):
            lines = [_batch_line(item)]
            lines.extend(_record_line(record, item.batch, self._decoder) for record in item.records or ())
            self._out.write("\n".join(lines) + "\n")
        else:
            self._out.write(_entry_line(item) + "\n")

    def problem(self, path: Path, problem: DumpProblem) -> None:
        self._out.flush()  # keep stdout and stderr in file order on a terminal
        report_problem(path, problem)

    def end_file(self, problems: Sequence[DumpProblem]) -> None:
        pass

    def finish(self) -> None:
        self._out.flush()


class JsonRenderer:
    """One JSON document, written as the items come: ``{"files": [{..., "batches": [...]}, ...]}``.

    Laid out exactly as ``json.dumps(document, indent=2)`` would, like every other ``--json`` output.
    """

    def __init__(self, decoder: RecordDecoder | None = None) -> None:
        self._decoder = decoder
        self._out = _Output()
        self._out.write('{\n  "files": [')
        self._files = 0
        self._items = 0

    def begin_file(self, path: Path, kind: str) -> None:
        head = f'\n    {{\n      "path": {json.dumps(str(path))},\n      "kind": {json.dumps(kind)},'
        head += '\n      "batches": ['
        if kind not in BATCH_KINDS:
            head += '],\n      "entries": ['
        self._out.write(("," if self._files else "") + head)
        self._files += 1
        self._items = 0

    def item(self, item: BatchDump | Entry) -> None:
        obj = batch_to_json(item, self._decoder) if isinstance(item, BatchDump) else item
        self._out.write(("," if self._items else "") + "\n        " + _indented(obj, 8))
        self._items += 1

    def problem(self, path: Path, problem: DumpProblem) -> None:
        report_problem(path, problem)  # in the document too, in end_file, after the items

    def end_file(self, problems: Sequence[DumpProblem]) -> None:
        tail = "\n      ]" if self._items else "]"
        if problems:
            tail += f',\n      "error": {_indented(problems[0].to_json(), 6)}'
            if len(problems) > 1:
                tail += f',\n      "errors": {_indented([p.to_json() for p in problems], 6)}'
        self._out.write(tail + "\n    }")

    def finish(self) -> None:
        self._out.write(("\n  ]" if self._files else "]") + "\n}\n")
        self._out.flush()


def _indented(obj: object, depth: int) -> str:
    """``obj`` as ``json.dumps(..., indent=2)`` lays it out ``depth`` spaces in."""
    return json.dumps(obj, indent=2).replace("\n", "\n" + " " * depth)

"""``dump_render``: a batch as the contract's JSON object (with our four extra fields, and its records when
they were read, each decoded when a decoder is given), and a problem as one stderr line naming the file and
the byte position. (Whole documents and kafka-dump-log's text, through the command: ``test_dump.py``.)"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from service.shell.tools.dump_readers import BatchDump, DumpProblem
from service.shell.tools.dump_render import batch_to_json, report_problem
from service.storage.records import Header, Record, decode_batch, encode_batch

NOW_MS = 1_700_000_000_000


def dump_of(records: list[Record], *, with_records: bool = True) -> BatchDump:
    batch = decode_batch(
        encode_batch(records, base_offset=10, producer_id=7, producer_epoch=1, base_sequence=3)
    )
    return BatchDump(batch, crc_valid=True, records=tuple(batch.records()) if with_records else None)


def test_a_batch_is_the_contracts_object_with_its_records() -> None:
    dump = dump_of(
        [Record(10, NOW_MS, b"k", b"\x00\xff", (Header("h", b"v"),)), Record(11, NOW_MS + 1, None, None)]
    )

    doc = batch_to_json(dump)

    assert {k: doc[k] for k in ("base_offset", "last_offset", "magic", "crc_valid", "compression")} == {
        "base_offset": 10,
        "last_offset": 11,
        "magic": 2,
        "crc_valid": True,
        "compression": "none",
    }
    assert (doc["producer_id"], doc["producer_epoch"], doc["base_sequence"], doc["last_sequence"]) == (
        7,
        1,
        3,
        4,
    )
    assert doc["records_count"] == 2 and doc["max_timestamp"] == NOW_MS + 1
    records = doc["records"]
    assert isinstance(records, list)
    assert [r["offset"] for r in records] == [10, 11]
    assert records[1]["key"] is None and records[1]["value"] is None
    assert records[0]["value"] == {"type": "BINARY", "data": base64.b64encode(b"\x00\xff").decode()}


def test_without_records_there_is_no_records_field_and_a_decoder_adds_decoded() -> None:
    assert "records" not in batch_to_json(dump_of([Record(10, NOW_MS, b"k", b"v")], with_records=False))

    def decoder(key: bytes | None, value: bytes | None) -> dict[str, object]:
        return {"key": (key or b"").decode(), "value": len(value or b"")}

    doc = batch_to_json(dump_of([Record(10, NOW_MS, b"k", b"value")]), decoder)

    records = doc["records"]
    assert isinstance(records, list)
    assert records[0]["decoded"] == {"key": "k", "value": 5}


def test_a_problem_is_one_line_naming_the_file_and_position(capsys: pytest.CaptureFixture[str]) -> None:
    report_problem(Path("/logs/t-0/00000000000000000000.log"), DumpProblem(70, "CRC mismatch"))
    report_problem(Path("/logs/t-0/00000000000000000000.index"), DumpProblem(None, "cannot be read"))

    assert capsys.readouterr().err.splitlines() == [
        "logcleaner: error: /logs/t-0/00000000000000000000.log, position 70: CRC mismatch",
        "logcleaner: error: /logs/t-0/00000000000000000000.index: cannot be read",
    ]

"""``dump --offsets-decoder`` and ``--transaction-log-decoder``: records of ``__consumer_offsets`` and
``__transaction_state`` segments shown decoded, in text and JSON, with raw bytes and a note for a version
Kafka does not define. The segment's keys and values are built by hand from Kafka's schemas."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from service.shell.cli import main
from service.storage.records import Record, encode_batch

NOW_MS = 1_700_000_000_000


def s16(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


OFFSET_KEY = struct.pack(">h", 1) + s16("billing") + s16("orders") + struct.pack(">i", 3)
OFFSET_VALUE_V3 = struct.pack(">hqi", 3, 120, 4) + s16("") + struct.pack(">q", NOW_MS)
GROUP_KEY = struct.pack(">h", 2) + s16("billing")
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01" + s16("orders") + b"\xff\xff\xff\xff"  # ConsumerProtocol v0
MEMBER_V3 = (
    s16("m-1") + struct.pack(">h", -1) + s16("c-1") + s16("/10.0.0.9") + struct.pack(">ii", 300000, 45000)
    + struct.pack(">i", len(SUBSCRIPTION)) + SUBSCRIPTION + struct.pack(">i", 0)
)  # fmt: skip
GROUP_VALUE_V3 = (
    struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m-1")
    + struct.pack(">qi", NOW_MS, 1) + MEMBER_V3
)  # fmt: skip
UNKNOWN_VALUE = struct.pack(">h", 7) + b"\xca\xfe"


def write_segment(path: Path, pairs: list[tuple[bytes | None, bytes | None]]) -> Path:
    records = [Record(i, NOW_MS, key, value) for i, (key, value) in enumerate(pairs)]
    path.write_bytes(encode_batch(records))
    return path


@pytest.fixture
def offsets_segment(tmp_path: Path) -> Path:
    directory = tmp_path / "__consumer_offsets-0"
    directory.mkdir()
    return write_segment(
        directory / f"{0:020d}.log",
        [
            (OFFSET_KEY, OFFSET_VALUE_V3),
            (GROUP_KEY, GROUP_VALUE_V3),
            (OFFSET_KEY, None),
            (OFFSET_KEY, UNKNOWN_VALUE),
        ],
    )


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["dump", *args])
    out, err = capsys.readouterr()
    return code, out, err


def records_of(out: str) -> list[dict[str, Any]]:
    batches: list[dict[str, Any]] = json.loads(out)["files"][0]["batches"]
    return [record for batch in batches for record in batch["records"]]


def test_offsets_decoder_json(offsets_segment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--offsets-decoder", "--json", str(offsets_segment))
    assert (code, err) == (0, "")
    decoded = [record["decoded"] for record in records_of(out)]  # --records is implied
    key = {"type": "offset_commit", "version": 1, "group": "billing", "topic": "orders", "partition": 3}
    assert decoded[0] == {
        "key": key,
        "value": {"version": 3, "offset": 120, "leader_epoch": 4, "metadata": "", "commit_timestamp": NOW_MS},
    }
    assert decoded[1] == {
        "key": {"type": "group_metadata", "version": 2, "group": "billing"},
        "value": {
            "version": 3,
            "protocol_type": "consumer",
            "generation": 1,
            "protocol": "range",
            "leader": "m-1",
            "current_state_timestamp": NOW_MS,
            "members": [
                {
                    "member_id": "m-1",
                    "group_instance_id": None,
                    "client_id": "c-1",
                    "client_host": "/10.0.0.9",
                    "rebalance_timeout": 300000,
                    "session_timeout": 45000,
                    "subscription": {"type": "BINARY", "data": base64.b64encode(SUBSCRIPTION).decode()},
                    "assignment": {"type": "BINARY", "data": ""},
                }
            ],
        },
    }
    assert decoded[2] == {"key": key, "value": None}  # a tombstone
    assert decoded[3]["value"] == {
        "version": 7,
        "note": "unknown OffsetCommitValue version 7 (known: 0-4); shown raw",
        "raw": {"type": "BINARY", "data": base64.b64encode(UNKNOWN_VALUE).decode()},
    }


def test_offsets_decoder_text(offsets_segment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--offsets-decoder", str(offsets_segment))
    assert (code, err) == (0, "")
    lines = [line for line in out.splitlines() if line.startswith("| offset:")]
    assert len(lines) == 4
    assert lines[0].endswith(
        'key: {"type": "offset_commit", "version": 1, "group": "billing", "topic": "orders", "partition": 3} '
        'payload: {"version": 3, "offset": 120, "leader_epoch": 4, "metadata": "", "commit_timestamp": '
        f"{NOW_MS}}}"
    )
    assert lines[2].endswith("payload: null")
    assert '"note": "unknown OffsetCommitValue version 7' in lines[3]


def test_without_a_decoder_records_are_raw(offsets_segment: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--records", "--json", str(offsets_segment))
    assert code == 0 and all("decoded" not in record for record in records_of(out))


def test_transaction_log_decoder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = struct.pack(">h", 0) + s16("txn-1")
    value = (
        struct.pack(">hqhib", 0, 5000, 0, 60000, 0) + struct.pack(">i", 0) + struct.pack(">qq", NOW_MS, -1)
    )
    path = write_segment(tmp_path / f"{0:020d}.log", [(key, value)])
    code, out, err = run(capsys, "--transaction-log-decoder", "--json", str(path))
    assert (code, err) == (0, "")
    assert records_of(out)[0]["decoded"] == {
        "key": {"version": 0, "transactional_id": "txn-1"},
        "value": {
            "version": 0,
            "producer_id": 5000,
            "producer_epoch": 0,
            "transaction_timeout_ms": 60000,
            "transaction_status": 0,
            "transaction_partitions": [],
            "transaction_last_update_timestamp_ms": NOW_MS,
            "transaction_start_timestamp_ms": -1,
        },
    }
    code, out, _ = run(capsys, "--transaction-log-decoder", str(path))
    assert code == 0 and 'key: {"version": 0, "transactional_id": "txn-1"} payload: {"version": 0' in out


def test_garbage_in_a_record_is_shown_raw_never_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_segment(
        tmp_path / f"{0:020d}.log", [(b"\x00", b"\xff"), (None, b"x"), (OFFSET_KEY, b"\x00\x03")]
    )
    code, out, err = run(capsys, "--offsets-decoder", "--json", str(path))
    assert (code, err) == (0, "")
    decoded = [record["decoded"] for record in records_of(out)]
    assert decoded[0]["key"]["note"] == "a key needs a 2-byte version"
    assert decoded[1]["key"] is None
    assert decoded[2]["value"]["note"].startswith("OffsetCommitValue version 3 does not decode at byte 2")


def test_both_decoders_at_once_is_bad_usage(
    offsets_segment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--offsets-decoder", "--transaction-log-decoder", str(offsets_segment))
    assert code == 2 and out == ""
    assert "give one of" in err and len(err.strip().splitlines()) == 1

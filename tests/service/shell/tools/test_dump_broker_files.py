"""``logcleaner dump`` of the broker files beside the segments, and errors on stderr under ``--json``."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from service.shell.cli import main
from service.storage.leader_epoch_checkpoint import EpochEntry, write_leader_epoch_checkpoint
from service.storage.partition_metadata import write_partition_metadata
from service.storage.producer_snapshot import ProducerSnapshotEntry, write_snapshot

SNAPSHOT_FIELDS = [
    "producer_id",
    "producer_epoch",
    "last_sequence",
    "last_offset",
    "offset_delta",
    "timestamp",
    "coordinator_epoch",
    "current_txn_first_offset",
]
ENTRY = ProducerSnapshotEntry(7, 2, 9, 41, 4, 1_700_000_000_000, 3, 37)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["dump", *args])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    code, out, err = run(capsys, "--json", *args)
    files: list[dict[str, Any]] = json.loads(out)["files"]
    return code, files, err


def test_snapshot_entries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_snapshot(tmp_path, 42, [ENTRY, ProducerSnapshotEntry(8, 0, -1, -1, 0, -1, 0)])
    code, files, err = run_json(capsys, str(path))
    assert (code, err) == (0, "")
    assert files[0]["kind"] == "snapshot" and files[0]["batches"] == []
    assert list(files[0]["entries"][0]) == SNAPSHOT_FIELDS
    assert files[0]["entries"][0]["current_txn_first_offset"] == 37
    assert files[0]["entries"][1]["current_txn_first_offset"] == -1
    code, out, _ = run(capsys, str(path))
    assert code == 0
    assert out.splitlines()[1] == (
        "producerId: 7 producerEpoch: 2 lastSequence: 9 lastOffset: 41 offsetDelta: 4 "
        "timestamp: 1700000000000 coordinatorEpoch: 3 currentTxnFirstOffset: 37"
    )


def test_corrupt_snapshot_is_reported_on_stderr_in_both_modes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_snapshot(tmp_path, 0, [ENTRY])
    data = bytearray(path.read_bytes())
    data[30] ^= 0xFF
    path.write_bytes(bytes(data))
    code, files, err = run_json(capsys, str(path))
    assert code == 2 and files[0]["entries"] == []
    assert files[0]["error"]["position"] == 2 and "CRC mismatch" in files[0]["error"]["message"]
    assert err == f"logcleaner: error: {path}, position 2: {files[0]['error']['message']}\n"
    code, _, text_err = run(capsys, str(path))
    assert code == 2 and text_err == err


def test_leader_epoch_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_leader_epoch_checkpoint(tmp_path, [EpochEntry(0, 0), EpochEntry(1, 90)])
    path = tmp_path / "leader-epoch-checkpoint"
    code, files, _ = run_json(capsys, str(path))
    assert code == 0 and files[0]["kind"] == "leader_epoch"
    assert files[0]["entries"] == [{"epoch": 0, "start_offset": 0}, {"epoch": 1, "start_offset": 90}]
    _, out, _ = run(capsys, str(path))
    assert out.splitlines()[1:] == ["epoch: 0 startOffset: 0", "epoch: 1 startOffset: 90"]
    path.write_bytes(b"0\n3\n0 0\n")
    code, files, err = run_json(capsys, str(path))
    assert code == 2 and "says 3 entries" in err and str(path) in err and "position 2" in err


def test_partition_metadata(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_partition_metadata(tmp_path, "AAAAAAAAAAEAAAAAAAAAAg")
    path = tmp_path / "partition.metadata"
    code, files, _ = run_json(capsys, str(path))
    assert code == 0 and files[0]["kind"] == "partition_metadata"
    assert files[0]["entries"] == [{"version": 0, "topic_id": "AAAAAAAAAAEAAAAAAAAAAg"}]
    _, out, _ = run(capsys, str(path))
    assert out.splitlines()[1] == "version: 0 topicId: AAAAAAAAAAEAAAAAAAAAAg"
    path.write_bytes(b"version: 0\ntopic_id: nope")
    code, files, err = run_json(capsys, str(path))
    assert code == 2 and files[0]["error"]["position"] == 11
    assert err.startswith(f"logcleaner: error: {path}, position 11: line 2:")


def test_legacy_message_set_says_which_magic_on_stderr_under_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A magic-1 message (Kafka 0.10): offset, size, crc, magic, attributes, timestamp, key -1, value "v".
    body = struct.pack(">bbqi", 1, 0, 0, -1) + struct.pack(">i", 1) + b"v"
    message = struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body  # a valid legacy CRC
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(message)
    code, files, err = run_json(capsys, str(path))
    assert code == 2 and files[0]["batches"] == []
    assert err.count("\n") == 1 and f"{path}, position 0:" in err
    assert "magic 1" in err and "only record batches with magic 2" in err

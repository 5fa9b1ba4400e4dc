"""``logcleaner dump``: the contract's JSON shape, kafka-dump-log's text, and every kind of bad file."""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from service.base.clock import ManualClock
from service.shell.cli import main
from service.storage.checkpoints import encode_checkpoint
from service.storage.clean_shutdown import write_clean_shutdown_marker
from service.storage.compression import CompressionType
from service.storage.control import encode_end_txn_marker_batch
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.offset_index import encode_entries as encode_offset_entries
from service.storage.records import RECORD_BATCH_OVERHEAD, Header, Record, TimestampType, encode_batch
from service.storage.time_index import encode_entries as encode_time_entries
from service.storage.topic_partition import TopicPartition
from service.storage.txn_index import AbortedTxn
from service.storage.txn_index import encode_entries as encode_txn_entries
from tests.paths import FIXTURES

NOW_MS = 1_700_000_000_000

CONTRACT_BATCH_FIELDS = {
    "position",
    "base_offset",
    "last_offset",
    "size_bytes",
    "magic",
    "crc_valid",
    "compression",
    "timestamp_type",
    "is_transactional",
    "is_control",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "max_timestamp",
    "delete_horizon_ms",
}
EXTENSION_BATCH_FIELDS = {"partition_leader_epoch", "records_count", "last_sequence", "crc"}
RECORD_FIELDS = {"offset", "timestamp", "key", "value", "headers"}

Json = dict[str, Any]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["dump", *args])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[Json], str]:
    code, out, err = run(capsys, "--json", *args)
    document = json.loads(out)
    assert set(document) == {"files"}
    assert out == json.dumps(document, indent=2) + "\n", "laid out as explain --json and clean --json are"
    return code, document["files"], err


def binary(data: bytes) -> Json:
    return {"type": "BINARY", "data": base64.b64encode(data).decode()}


@pytest.fixture
def kafka_fixtures() -> Path:
    assert FIXTURES.is_dir(), f"the Kafka-written fixtures are missing: expected them in {FIXTURES}"
    return FIXTURES


def open_log(directory: Path, **config: Any) -> PartitionLog:
    directory.mkdir(parents=True, exist_ok=True)
    return load_partition_log(directory, LogConfig(**config), clock=ManualClock(NOW_MS)).log


def write_varied_log(directory: Path) -> Path:
    """Records with headers and tombstones, a committed and an aborted transaction, every codec."""
    log = open_log(directory)
    log.append_records(
        [
            Record(0, NOW_MS, b"k1", b"hello", (Header("h1", b"v1"), Header("h2", None))),
            Record(0, NOW_MS + 1, b"k2", None),
            Record(0, NOW_MS + 2, None, b"\x00\xff\x10"),
        ]
    )
    for codec in CompressionType:
        log.append_records([Record(0, NOW_MS, b"c", codec.label.encode() * 50)], compression=codec)
    for producer_id, commit in ((7, True), (8, False)):
        log.append_records(
            [Record(0, NOW_MS, b"t", b"txn")],
            producer_id=producer_id,
            producer_epoch=1,
            base_sequence=0,
            is_transactional=True,
        )
        log.append_batches(
            encode_end_txn_marker_batch(
                offset=0, producer_id=producer_id, producer_epoch=1, commit=commit, timestamp=NOW_MS
            )
        )
    log.close()
    return directory / "00000000000000000000.log"


# -- JSON shape --------------------------------------------------------------------------------


def test_json_shape_of_a_varied_log_is_the_contracts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_varied_log(tmp_path / "t-0")
    code, files, err = run_json(capsys, "--records", str(path))
    assert (code, err) == (0, "")
    [dumped] = files
    assert set(dumped) == {"path", "kind", "batches"}
    assert (dumped["path"], dumped["kind"]) == (str(path), "log")
    batches = dumped["batches"]
    assert len(batches) == 1 + len(CompressionType) + 4
    for batch in batches:
        assert set(batch) == CONTRACT_BATCH_FIELDS | EXTENSION_BATCH_FIELDS | {"records"}
        assert batch["magic"] == 2 and batch["crc_valid"] is True
        assert batch["timestamp_type"] == "CreateTime"
        assert batch["delete_horizon_ms"] is None
        for record in batch["records"]:
            expected = RECORD_FIELDS | (
                {"control_type", "coordinator_epoch"} if batch["is_control"] else set()
            )
            assert set(record) == expected
    positions = [b["position"] for b in batches]
    assert positions == sorted(positions) and positions[0] == 0
    assert all(b2["position"] == b1["position"] + b1["size_bytes"] for b1, b2 in itertools.pairwise(batches))

    first = batches[0]
    assert (first["base_offset"], first["last_offset"], first["records_count"]) == (0, 2, 3)
    assert first["records"] == [
        {
            "offset": 0,
            "timestamp": NOW_MS,
            "key": binary(b"k1"),
            "value": binary(b"hello"),
            "headers": [{"key": "h1", "value": binary(b"v1")}, {"key": "h2", "value": None}],
        },
        {"offset": 1, "timestamp": NOW_MS + 1, "key": binary(b"k2"), "value": None, "headers": []},
        {"offset": 2, "timestamp": NOW_MS + 2, "key": None, "value": binary(b"\x00\xff\x10"), "headers": []},
    ]


def test_json_reports_every_codec_and_decodes_its_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_varied_log(tmp_path / "t-0")
    _, files, _ = run_json(capsys, "--records", str(path))
    codec_batches = files[0]["batches"][1 : 1 + len(CompressionType)]
    assert [b["compression"] for b in codec_batches] == ["none", "gzip", "snappy", "lz4", "zstd"]
    for batch in codec_batches:
        [record] = batch["records"]
        assert base64.b64decode(record["value"]["data"]) == batch["compression"].encode() * 50


def test_json_shows_transactions_and_their_markers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_varied_log(tmp_path / "t-0")
    _, files, _ = run_json(capsys, "--records", str(path))
    txn_batches = files[0]["batches"][-4:]
    assert [(b["is_transactional"], b["is_control"], b["producer_id"]) for b in txn_batches] == [
        (True, False, 7),
        (True, True, 7),
        (True, False, 8),
        (True, True, 8),
    ]
    markers = [b["records"][0] for b in txn_batches if b["is_control"]]
    assert [(m["control_type"], m["coordinator_epoch"]) for m in markers] == [("COMMIT", 0), ("ABORT", 0)]
    assert txn_batches[0]["base_sequence"] == 0 and txn_batches[1]["base_sequence"] == -1


def test_json_without_records_has_no_records_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_varied_log(tmp_path / "t-0")
    _, files, _ = run_json(capsys, str(path))
    assert all("records" not in batch for batch in files[0]["batches"])


def test_delete_horizon_and_log_append_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(encode_batch([Record(0, NOW_MS, b"k", None)], delete_horizon_ms=NOW_MS + 5))
    log = open_log(tmp_path / "lat-0", message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    log.append_records([Record(0, 5, b"k", b"v")])
    log.close()
    lat_path = tmp_path / "lat-0" / "00000000000000000000.log"
    _, files, _ = run_json(capsys, "--records", str(path), str(lat_path))
    assert files[0]["batches"][0]["delete_horizon_ms"] == NOW_MS + 5
    lat_batch = files[1]["batches"][0]
    assert lat_batch["timestamp_type"] == "LogAppendTime"
    assert lat_batch["records"][0]["timestamp"] == lat_batch["max_timestamp"] == NOW_MS
    _, out, _ = run(capsys, str(path))
    assert f"deleteHorizonMs: OptionalLong[{NOW_MS + 5}]" in out


# -- text --------------------------------------------------------------------------------------


def test_text_is_kafka_dump_log_like(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_varied_log(tmp_path / "t-0")
    code, out, err = run(capsys, "--records", str(path))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {path}", "Log starting offset: 0"]
    assert lines[2].startswith("baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 ")
    assert "position: 0 CreateTime: " in lines[2] and lines[2].endswith("isvalid: true")
    assert "magic: 2 compresscodec: none crc: " in lines[2]
    assert lines[3] == (
        f"| offset: 0 CreateTime: {NOW_MS} keySize: 2 valueSize: 5 sequence: -1 headerKeys: [h1,h2] "
        "key: k1 payload: hello"
    )
    assert lines[4].endswith("keySize: 2 valueSize: -1 sequence: -1 headerKeys: [] key: k2")
    assert lines[5].endswith("keySize: -1 valueSize: 3 sequence: -1 headerKeys: [] payload: 0x00ff10")
    assert any("compresscodec: zstd" in line for line in lines)
    assert any(line.endswith("endTxnMarker: COMMIT coordinatorEpoch: 0") for line in lines)
    assert any(line.endswith("endTxnMarker: ABORT coordinatorEpoch: 0") for line in lines)


# -- Kafka-written fixtures --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("kraft-metadata-a.log", [(0, [(0, 23)]), (1, [(1, 24), (2, 65), (3, 65)])]),
        ("kraft-metadata-b.log", [(1, [(1, 23)]), (2, [(2, 25), (3, 65)])]),
    ],
)
def test_dumps_kafka_written_segments(
    kafka_fixtures: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    expected: list[tuple[int, list[tuple[int, int]]]],
) -> None:
    path = kafka_fixtures / name
    code, files, err = run_json(capsys, "--records", str(path))
    assert (code, err) == (0, "")
    batches = files[0]["batches"]
    assert all(b["crc_valid"] and b["compression"] == "none" and b["magic"] == 2 for b in batches)
    got = [
        (b["base_offset"], [(r["offset"], len(base64.b64decode(r["value"]["data"]))) for r in b["records"]])
        for b in batches
    ]
    assert got == expected
    assert all(r["key"] is None for b in batches for r in b["records"])
    assert sum(b["size_bytes"] for b in batches) == path.stat().st_size
    code, out, _ = run(capsys, str(path))
    assert code == 0 and out.count("isvalid: true") == len(expected)


def test_a_flipped_byte_in_a_kafka_segment_is_reported_with_file_and_position(
    kafka_fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kraft-metadata-a.log"
    shutil.copyfile(kafka_fixtures / path.name, path)
    data = bytearray(path.read_bytes())
    second = 12 + int.from_bytes(data[8:12], "big")
    data[second + 30] ^= 0x01  # inside the CRC-covered part of the second batch
    path.write_bytes(bytes(data))
    code, files, _ = run_json(capsys, "--records", str(path))
    assert code == 2
    assert [b["crc_valid"] for b in files[0]["batches"]] == [True, False]
    assert files[0]["error"]["position"] == second
    assert "CRC" in files[0]["error"]["message"]
    code, out, err = run(capsys, str(path))
    assert code == 2 and "isvalid: false" in out
    assert err.strip() == f"logcleaner: error: {path}, position {second}: {files[0]['error']['message']}"


# -- corrupt and truncated logs ----------------------------------------------------------------


def three_batches(path: Path) -> list[int]:
    """Write three 2-record batches to ``path``; return their positions."""
    batches = [
        encode_batch([Record(o, NOW_MS, b"k%d" % o, b"value"), Record(o + 1, NOW_MS, b"x", b"y")])
        for o in (0, 2, 4)
    ]
    path.write_bytes(b"".join(batches))
    return [0, len(batches[0]), len(batches[0]) + len(batches[1])]


def test_truncated_log_prints_what_it_read_then_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "00000000000000000000.log"
    positions = three_batches(path)
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    code, files, _ = run_json(capsys, "--records", str(path))
    assert code == 2
    assert [b["position"] for b in files[0]["batches"]] == positions[:2]
    assert files[0]["error"]["position"] == positions[2]
    assert "incomplete batch" in files[0]["error"]["message"]
    code, out, err = run(capsys, str(path))
    assert code == 2 and out.count("baseOffset:") == 2
    assert len(err.splitlines()) == 1 and f"{path}, position {positions[2]}: incomplete batch" in err


def test_crc_flip_reports_isvalid_false_and_reads_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "00000000000000000000.log"
    positions = three_batches(path)
    data = bytearray(path.read_bytes())
    data[positions[1] + 40] ^= 0xFF  # maxTimestamp of the middle batch: CRC-covered, structure intact
    path.write_bytes(bytes(data))
    code, files, _ = run_json(capsys, "--records", str(path))
    assert code == 2
    batches = files[0]["batches"]
    assert [b["crc_valid"] for b in batches] == [True, False, True]
    assert [len(b["records"]) for b in batches] == [2, 2, 2]
    assert files[0]["error"]["position"] == positions[1]
    assert "errors" not in files[0]


def test_broken_batch_length_ends_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "00000000000000000000.log"
    positions = three_batches(path)
    data = bytearray(path.read_bytes())
    data[positions[1] + 16] = 7  # magic byte of the middle batch
    path.write_bytes(bytes(data))
    code, files, _ = run_json(capsys, str(path))
    assert code == 2
    assert [b["position"] for b in files[0]["batches"]] == [0]
    assert files[0]["error"] == {"position": positions[1] + 16, "message": "unknown magic byte 7"}


def test_corrupt_records_with_a_valid_crc_show_what_decodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = encode_batch([Record(i, NOW_MS, b"k", b"v") for i in range(3)])
    area = good[RECORD_BATCH_OVERHEAD:]
    record_size = len(area) // 3
    broken_area = area[: 2 * record_size] + b"\x7f" + area[2 * record_size + 1 :]  # third length runs over
    records = [Record(i, NOW_MS, None, None) for i in range(3)]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(encode_batch(records, records_area=broken_area))
    code, files, _ = run_json(capsys, "--records", str(path))
    assert code == 2
    [batch] = files[0]["batches"]
    assert batch["crc_valid"] is True
    assert [r["offset"] for r in batch["records"]] == [0, 1]
    assert batch["records_error"] == files[0]["error"]
    assert "records of the batch at 0" in files[0]["error"]["message"]


def test_several_files_all_processed_before_the_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "00000000000000000000.log"
    three_batches(bad)
    bad.write_bytes(bad.read_bytes()[:-1])
    good = tmp_path / "00000000000000000100.log"
    three_batches(good)
    code, files, _ = run_json(capsys, str(bad), str(good))
    assert code == 2
    assert [("error" in f, len(f["batches"])) for f in files] == [(True, 2), (False, 3)]


def test_json_of_files_of_every_shape_is_indented_as_the_other_commands_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Logs with and without batches or errors, an index with entries, an empty one: one layout."""
    bad = tmp_path / "00000000000000000000.log"
    three_batches(bad)
    bad.write_bytes(bad.read_bytes()[:-1])
    empty_log = tmp_path / "00000000000000000200.log"
    empty_log.write_bytes(b"")
    index = tmp_path / "00000000000000000000.index"
    index.write_bytes(encode_offset_entries([(1, 0), (2, 70)]))
    empty_index = tmp_path / "00000000000000000200.index"
    empty_index.write_bytes(b"")
    code, files, _ = run_json(capsys, "--records", str(bad), str(empty_log), str(index), str(empty_index))
    assert code == 2
    assert [len(f["batches"]) for f in files] == [2, 0, 0, 0]
    assert [len(f.get("entries", ())) for f in files] == [0, 0, 2, 0]
    code, out, _ = run(capsys, "--json")  # usage error: no file, no document
    assert code == 2 and out == ""


# -- indexes, checkpoints, marker --------------------------------------------------------------


def test_offset_index_entries_stop_at_preallocated_slots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(encode_offset_entries([(105, 0), (110, 4100)], base_offset=100) + bytes(8 * 1000))
    code, files, _ = run_json(capsys, str(path))
    assert code == 0
    assert files[0] == {
        "path": str(path),
        "kind": "index",
        "batches": [],
        "entries": [{"offset": 105, "position": 0}, {"offset": 110, "position": 4100}],
    }
    _, out, _ = run(capsys, str(path))
    assert out.splitlines()[1:] == ["offset: 105 position: 0", "offset: 110 position: 4100"]


def test_time_index_entries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes(encode_time_entries([(NOW_MS, 105), (NOW_MS + 9, 110)], base_offset=100) + bytes(12))
    code, files, _ = run_json(capsys, str(path))
    assert code == 0
    assert files[0]["entries"] == [
        {"timestamp": NOW_MS, "offset": 105},
        {"timestamp": NOW_MS + 9, "offset": 110},
    ]
    _, out, _ = run(capsys, str(path))
    assert out.splitlines()[1] == f"timestamp: {NOW_MS} offset: 105"


def test_index_with_a_partial_entry_is_corrupt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(encode_time_entries([(NOW_MS, 3)]) + b"\x01\x02")
    code, files, _ = run_json(capsys, str(path))
    assert code == 2
    assert files[0]["entries"] == [{"timestamp": NOW_MS, "offset": 3}]
    assert files[0]["error"]["position"] == 12


def test_index_without_a_base_offset_name_is_corrupt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "copy.index"
    path.write_bytes(encode_offset_entries([(1, 0)]))
    code, files, _ = run_json(capsys, str(path))
    assert code == 2 and files[0]["error"]["position"] is None


def test_txn_index_entries_of_a_real_abort(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_varied_log(tmp_path / "t-0")
    path = tmp_path / "t-0" / "00000000000000000000.txnindex"
    code, files, _ = run_json(capsys, str(path))
    assert code == 0
    assert files[0]["kind"] == "txnindex"
    [entry] = files[0]["entries"]
    assert entry == {
        "version": 0,
        "producer_id": 8,
        "first_offset": entry["first_offset"],
        "last_offset": entry["first_offset"] + 1,
        "last_stable_offset": entry["first_offset"] + 2,
    }
    _, out, _ = run(capsys, str(path))
    assert out.splitlines()[1].startswith("version: 0 producerId: 8 firstOffset: ")


def test_txn_index_with_a_bad_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    entries = encode_txn_entries([AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 7, 9, 10)])
    path.write_bytes(entries[:34] + b"\x00\x05" + entries[36:])
    code, files, _ = run_json(capsys, str(path))
    assert code == 2
    assert [e["producer_id"] for e in files[0]["entries"]] == [1]
    assert files[0]["error"]["position"] == 34


@pytest.mark.parametrize(
    "name",
    [
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "cleaner-offset-checkpoint",
        "replication-offset-checkpoint",
    ],
)
def test_checkpoint_entries(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    path = tmp_path / name
    path.write_bytes(encode_checkpoint({TopicPartition("a", 0): 5, TopicPartition("b.c", 3): 1 << 40}))
    code, files, _ = run_json(capsys, str(path))
    assert code == 0
    assert files[0]["kind"] == "checkpoint"
    assert files[0]["entries"] == [
        {"topic": "a", "partition": 0, "offset": 5},
        {"topic": "b.c", "partition": 3, "offset": 1 << 40},
    ]
    _, out, _ = run(capsys, str(path))
    assert out.splitlines()[1] == "topic: a partition: 0 offset: 5"


def test_corrupt_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_bytes(b"0\n1\nfoo 0 notanumber\n")
    code, files, err = run_json(capsys, str(path))
    assert code == 2 and files[0]["entries"] == []
    assert files[0]["error"]["position"] == 4
    assert err == f"logcleaner: error: {path}, position 4: {files[0]['error']['message']}\n"


def test_clean_shutdown_marker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_clean_shutdown_marker(tmp_path, 42)
    code, files, _ = run_json(capsys, str(tmp_path / ".kafka_cleanshutdown"))
    assert code == 0
    assert files[0]["kind"] == "clean_shutdown" and files[0]["entries"] == [{"broker_epoch": 42}]
    _, out, _ = run(capsys, str(tmp_path / ".kafka_cleanshutdown"))
    assert out.splitlines()[1] == "brokerEpoch: 42"


# -- kinds and usage ---------------------------------------------------------------------------


def test_temp_suffix_files_are_dumped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "00000000000000000000.log.deleted"
    three_batches(path)
    code, files, _ = run_json(capsys, str(path))
    assert code == 0 and files[0]["kind"] == "log" and len(files[0]["batches"]) == 3


def test_unknown_kind_exits_2_naming_the_file_and_the_kinds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "00000000000000000000.bin"
    path.write_bytes(b"")
    code, out, err = run(capsys, str(path))
    assert code == 2 and out == ""
    assert str(path) in err and ".timeindex" in err and "cleaner-offset-checkpoint" in err


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(tmp_path / "00000000000000000000.log"))
    assert code == 2 and "does not exist" in err


def test_no_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(capsys)
    assert code == 2


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "--records" in out and "kafka-dump-log" in out


def test_console_script_dumps_a_kafka_segment(kafka_fixtures: Path, tmp_path: Path) -> None:
    bad = tmp_path / "00000000000000000000.log"
    three_batches(bad)
    bad.write_bytes(bad.read_bytes()[:-3])
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "service",
            "dump",
            "--json",
            "--records",
            str(kafka_fixtures / "kraft-metadata-a.log"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["files"][0]["batches"]) == 2
    result = subprocess.run(
        [sys.executable, "-m", "service", "dump", str(bad)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "position" in result.stderr

"""``logcleaner gen``: the workload it promises, written through the storage layer into a valid log dir."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.base.clock import ManualClock
from service.base.errors import ConflictError, InvalidInputError
from service.config.topic_store import TOPIC_CONFIGS_FILE, TopicConfigStore
from service.shell.cli import main
from service.shell.tools.gen import (
    IDEMPOTENT_PRODUCER_ID,
    TRANSACTIONAL_PRODUCER_ID,
    GenOptions,
    encode_records_area,
    generate,
)
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.clean_shutdown import read_clean_shutdown_marker
from service.storage.compression import CompressionType
from service.storage.control import ControlRecordType, decode_end_txn_marker
from service.storage.dir_lock import LogDirLock
from service.storage.file_records import iter_file_batches
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.records import Record, RecordBatch, decode_records, encode_records
from service.storage.topic_partition import TopicPartition
from service.storage.txn_index import decode_entries

NOW_MS = 1_700_000_000_000


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["gen", *args])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], log_dir: Path, *args: str) -> list[dict[str, Any]]:
    code, out, err = run(capsys, "--log-dir", str(log_dir), "--json", *args)
    assert code == 0, err
    document = json.loads(out)
    assert set(document) == {"topics"}
    assert out == json.dumps(document, indent=2) + "\n", "laid out as every other --json output"
    topics: list[dict[str, Any]] = document["topics"]
    return topics


def batches(partition_dir: Path) -> list[RecordBatch]:
    """Every batch of every segment, read straight from the files (no loading, nothing changed)."""
    out: list[RecordBatch] = []
    for path in sorted(partition_dir.glob("*.log")):
        with path.open("rb") as f:
            size = path.stat().st_size
            out.extend(iter_file_batches(f.fileno(), 0, size, path=str(path)))
    return out


def records(partition_dir: Path) -> list[Record]:
    return [r for b in batches(partition_dir) for r in b.records()]


# -- what is generated -------------------------------------------------------------------------


def test_counts_and_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = run_json(
        capsys, tmp_path, "--topics", "2", "--partitions", "3", "--records", "250", "--batch-size", "100"
    )
    assert [(t["topic"], t["partition"]) for t in summary] == [
        (f"gen-{t}", p) for t in range(2) for p in range(3)
    ]
    for entry in summary:
        assert set(entry) == {"topic", "partition", "records", "log_end_offset", "segments", "size_bytes"}
        assert (entry["records"], entry["log_end_offset"], entry["segments"]) == (250, 250, 1)
        directory = tmp_path / f"{entry['topic']}-{entry['partition']}"
        assert entry["size_bytes"] == sum(p.stat().st_size for p in directory.glob("*.log"))
        assert [b.records_count for b in batches(directory)] == [100, 100, 50]
        assert [r.offset for r in records(directory)] == list(range(250))


def test_text_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--log-dir", str(tmp_path), "--topic", "orders", "--records", "10")
    assert code == 0
    assert out.startswith("orders-0: 10 records appended, log end offset 10, 1 segments, ")


def test_key_cardinality_and_value_size(tmp_path: Path) -> None:
    generate(GenOptions(tmp_path, records=3000, keys=20, value_size=37), clock=ManualClock(NOW_MS))
    got = records(tmp_path / "gen-0-0")
    assert {r.key for r in got} == {b"key-%d" % i for i in range(20)}
    assert {len(r.value or b"") for r in got} == {37}


def test_default_keys_are_one_per_record(tmp_path: Path) -> None:
    generate(GenOptions(tmp_path, records=1000), clock=ManualClock(NOW_MS))
    keys = {r.key for r in records(tmp_path / "gen-0-0")}
    assert keys <= {b"key-%d" % i for i in range(1000)} and len(keys) > 500


def test_tombstone_share(tmp_path: Path) -> None:
    generate(GenOptions(tmp_path, records=5000, tombstones=0.3), clock=ManualClock(NOW_MS))
    got = records(tmp_path / "gen-0-0")
    share = sum(r.value is None for r in got) / len(got)
    assert 0.27 < share < 0.33
    assert all(r.key is not None for r in got)


def test_timestamps_spread_evenly_from_the_start(tmp_path: Path) -> None:
    generate(
        GenOptions(tmp_path, records=10, batch_size=4, timestamp_start_ms=1000, timestamp_spread_ms=9000)
    )
    assert [r.timestamp for r in records(tmp_path / "gen-0-0")] == list(range(1000, 10_001, 1000))


def test_default_timestamps_end_now(tmp_path: Path) -> None:
    generate(GenOptions(tmp_path, records=11, timestamp_spread_ms=10_000), clock=ManualClock(NOW_MS))
    assert [r.timestamp for r in records(tmp_path / "gen-0-0")] == list(
        range(NOW_MS - 10_000, NOW_MS + 1, 1000)
    )


def test_future_share_stamps_whole_batches_ahead(tmp_path: Path) -> None:
    options = GenOptions(tmp_path, records=1000, batch_size=10, future_share=0.25, future_ms=3_600_000)
    generate(options, clock=ManualClock(NOW_MS))
    got = batches(tmp_path / "gen-0-0")
    future = [b for b in got if b.max_timestamp > NOW_MS]
    assert len(future) == 25
    assert all(r.timestamp == NOW_MS + 3_600_000 for b in future for r in b.records())


def test_future_share_on_the_real_clock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_json(capsys, tmp_path, "--records", "100", "--batch-size", "10", "--future-share", "1")
    now_ms = int(time.time() * 1000)
    assert all(r.timestamp > now_ms + 3_600_000 for r in records(tmp_path / "gen-0-0"))


@pytest.mark.parametrize("codec", list(CompressionType))
def test_compression_codec_is_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], codec: CompressionType
) -> None:
    run_json(capsys, tmp_path, "--records", "300", "--batch-size", "100", "--compression", codec.label)
    got = batches(tmp_path / "gen-0-0")
    assert [b.compression for b in got] == [codec] * 3
    assert [r.offset for b in got for r in b.records()] == list(range(300))
    code = main(["dump", "--json", str(tmp_path / "gen-0-0" / "00000000000000000000.log")])
    dumped = json.loads(capsys.readouterr().out)["files"][0]["batches"]
    assert code == 0 and {b["compression"] for b in dumped} == {codec.label}


def test_idempotent_batches_carry_a_producer_id_and_sequences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a Kafka 3.x producer writes by default: one producer id and epoch, sequences per partition."""
    args = ("--records", "300", "--batch-size", "100", "--partitions", "2", "--compression", "lz4")
    run_json(capsys, tmp_path, *args, "--idempotent")
    for partition in ("gen-0-0", "gen-0-1"):
        got = batches(tmp_path / partition)
        assert [(b.producer_id, b.producer_epoch, b.base_sequence) for b in got] == [
            (IDEMPOTENT_PRODUCER_ID, 0, sequence) for sequence in (0, 100, 200)
        ]
        assert not any(b.is_transactional for b in got)
    run_json(capsys, tmp_path / "plain", *args)
    assert {(b.producer_id, b.base_sequence) for b in batches(tmp_path / "plain" / "gen-0-0")} == {(-1, -1)}
    run_json(capsys, tmp_path, *args, "--idempotent")  # a re-run appends: the producer's sequences go on
    assert [b.base_sequence for b in batches(tmp_path / "gen-0-1")] == [0, 100, 200, 300, 400, 500]


def test_transactional_batches_end_in_commits_and_aborts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a transactional producer writes: its batches flagged, a marker after every N of them and after the
    last, every other transaction aborted at share 0.5; the aborted ones indexed, none left open."""
    args = ("--records", "300", "--batch-size", "10", "--compression", "lz4", "--transaction-batches", "4")
    [summary] = run_json(capsys, tmp_path, *args, "--aborted-transactions", "0.5")
    got = batches(tmp_path / "gen-0-0")
    data = [b for b in got if not b.is_control]
    markers = [b for b in got if b.is_control]
    assert all(b.is_transactional and b.producer_id == TRANSACTIONAL_PRODUCER_ID for b in got)
    assert [b.base_sequence for b in data] == list(range(0, 300, 10))
    assert [sum(1 for _ in b.records()) for b in data] == [10] * 30
    kinds = [decode_end_txn_marker(next(iter(b.records()))).control_type for b in markers]
    commit, abort = ControlRecordType.COMMIT, ControlRecordType.ABORT
    assert kinds == [commit, abort] * 4  # 30 batches: seven transactions of 4, one of 2
    assert [b.base_offset for b in markers] == [40, 81, 122, 163, 204, 245, 286, 307]
    assert summary["log_end_offset"] == 308 and summary["records"] == 300
    aborted = decode_entries((tmp_path / "gen-0-0" / "00000000000000000000.txnindex").read_bytes())
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in aborted] == [
        (TRANSACTIONAL_PRODUCER_ID, first, first + 40) for first in (41, 123, 205)
    ] + [(TRANSACTIONAL_PRODUCER_ID, 287, 307)]
    loaded = load_log_dir(tmp_path, lambda _topic: LogConfig(), clock=ManualClock(NOW_MS))
    try:
        (log,) = loaded.logs.values()
        assert log.last_stable_offset == log.log_end_offset == 308  # no transaction left open
    finally:
        close_log_dir(loaded)
    run_json(capsys, tmp_path, *args)  # a re-run appends: the producer's sequences go on
    assert [b.base_sequence for b in batches(tmp_path / "gen-0-0") if not b.is_control][-1] == 590


def test_small_segment_bytes_roll_segments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [summary] = run_json(
        capsys,
        tmp_path,
        "--records",
        "500",
        "--batch-size",
        "10",
        "--value-size",
        "20",
        "--segment-bytes",
        "2000",
    )
    logs = sorted((tmp_path / "gen-0-0").glob("*.log"))
    assert summary["segments"] == len(logs) > 5
    assert all(p.stat().st_size <= 2000 for p in logs)
    assert [r.offset for r in records(tmp_path / "gen-0-0")] == list(range(500))


def test_rerun_appends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_json(capsys, tmp_path, "--records", "120", "--batch-size", "50")
    [summary] = run_json(capsys, tmp_path, "--records", "80", "--batch-size", "50")
    assert (summary["records"], summary["log_end_offset"]) == (80, 200)
    assert [r.offset for r in records(tmp_path / "gen-0-0")] == list(range(200))


def test_same_seed_same_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = (
        "--records",
        "500",
        "--keys",
        "30",
        "--tombstones",
        "0.2",
        "--timestamp-start",
        "5",
        "--seed",
        "9",
    )
    run_json(capsys, tmp_path / "a", *args)
    run_json(capsys, tmp_path / "b", *args)
    run_json(capsys, tmp_path / "c", *args[:-1], "10")
    log = "gen-0-0/00000000000000000000.log"
    assert (tmp_path / "a" / log).read_bytes() == (tmp_path / "b" / log).read_bytes()
    assert (tmp_path / "a" / log).read_bytes() != (tmp_path / "c" / log).read_bytes()


def test_compacted_topic_with_tombstones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_json(
        capsys, tmp_path, "--records", "200", "--tombstones", "0.5", "--cleanup-policy", "compact,delete"
    )
    assert any(r.value is None for r in records(tmp_path / "gen-0-0"))


def test_non_default_topic_configs_are_stored_as_overrides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_json(capsys, tmp_path / "plain", "--records", "10")
    assert not (tmp_path / "plain" / TOPIC_CONFIGS_FILE).exists()

    args = (
        "--topics",
        "2",
        "--records",
        "10",
        "--cleanup-policy",
        "delete,compact",
        "--segment-bytes",
        "4096",
    )
    run_json(capsys, tmp_path / "compacted", *args)
    store = TopicConfigStore([tmp_path / "compacted"])
    for topic in ("gen-0", "gen-1"):
        assert store.get(topic) == {"cleanup.policy": "compact,delete", "segment.bytes": "4096"}
    code, out, err = main_output(
        capsys, "explain", "--override", f"log.dirs={tmp_path / 'compacted'}", "--json"
    )
    assert code == 0, err
    assert {p["cleanup_policy"] for p in json.loads(out)["partitions"]} == {"compact,delete"}


def main_output(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# -- the directory it leaves -------------------------------------------------------------------


def test_result_reloads_as_a_cleanly_shut_down_log_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_json(capsys, tmp_path, "--topic", "other", "--records", "30")
    run_json(
        capsys,
        tmp_path,
        "--topics",
        "1",
        "--partitions",
        "2",
        "--records",
        "500",
        "--batch-size",
        "50",
        "--segment-bytes",
        "20000",
    )
    assert read_clean_shutdown_marker(tmp_path) is not None
    recovery = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read()
    assert recovery == {
        TopicPartition("other", 0): 30,
        TopicPartition("gen-0", 0): 500,
        TopicPartition("gen-0", 1): 500,
    }
    loaded = load_log_dir(tmp_path, lambda topic: LogConfig(), clock=ManualClock(NOW_MS))
    try:
        assert loaded.had_clean_shutdown and loaded.recovered_segments == 0
        assert {tp: log.log_end_offset for tp, log in loaded.logs.items()} == recovery
        assert len(loaded.logs[TopicPartition("gen-0", 0)].segments) > 1
        assert len(loaded.logs[TopicPartition("gen-0", 0)].read(0, max_records=1000)) == 500
    finally:
        close_log_dir(loaded)


def test_a_locked_log_dir_is_refused(tmp_path: Path) -> None:
    with LogDirLock(tmp_path), pytest.raises(ConflictError):
        generate(GenOptions(tmp_path, records=1))


def test_a_batch_too_large_is_refused_and_leaves_no_new_partition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "--log-dir", str(tmp_path), "--records", "50", "--segment-bytes", "30000")
    assert code == 0, err
    before = {p.name: p.read_bytes() for p in (tmp_path / "gen-0-0").iterdir()}
    code, _, err = run(
        capsys,
        *("--log-dir", str(tmp_path), "--topics", "2", "--records", "50", "--batch-size", "20"),
        *("--segment-bytes", "300"),
    )
    assert code == 2 and "--batch-size" in err
    assert not (tmp_path / "gen-1-0").exists()  # created by the failed run: gone
    assert {p.name: p.read_bytes() for p in (tmp_path / "gen-0-0").iterdir()} == before
    loaded = load_log_dir(tmp_path, lambda topic: LogConfig(), clock=ManualClock(NOW_MS))
    try:
        assert set(loaded.logs) == {TopicPartition("gen-0", 0)}
        assert loaded.logs[TopicPartition("gen-0", 0)].log_end_offset == 50
    finally:
        close_log_dir(loaded)


# -- bad options -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"records": -1},
        {"keys": 0},
        {"tombstones": 2.0},
        {"future_share": -1.0},
        {"segment_bytes": 1},
        {"topics": ("ok", "no way")},
        {"topics": ()},
        {"cleanup_policy": frozenset({"keep"})},
        {"transaction_batches": -1},
        {"aborted_share": 0.5},
        {"transaction_batches": 2, "aborted_share": -0.5},
        {"idempotent": True, "transaction_batches": 2},
    ],
)
def test_options_are_checked_for_library_callers(tmp_path: Path, changes: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError):
        GenOptions(tmp_path, **changes)


def test_console_script(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "service", "gen", "--log-dir", str(tmp_path), "--records", "10", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["topics"][0]["log_end_offset"] == 10


# -- the records-area encoder ------------------------------------------------------------------

_bytes_or_none = st.none() | st.binary(max_size=300)


@given(
    st.lists(
        st.tuples(st.integers(0, 1 << 40), st.binary(max_size=40) | st.none(), _bytes_or_none),
        min_size=1,
        max_size=40,
    )
)
def test_records_area_is_what_records_encodes(rows: list[tuple[int, bytes | None, bytes | None]]) -> None:
    base = rows[0][0]
    expected = [Record(i, t, k, v) for i, (t, k, v) in enumerate(rows)]
    area = encode_records_area([t for t, _, _ in rows], [k for _, k, _ in rows], [v for _, _, v in rows])
    assert area == encode_records(expected, 0, base)
    assert decode_records(area, len(rows), 0, base) == expected


def test_partition_dirs_hold_a_brokers_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_json(capsys, tmp_path, "--topics", "1", "--partitions", "2", "--records", "500", "--batch-size", "50")
    ids = {(tmp_path / f"gen-0-{p}" / "partition.metadata").read_text() for p in range(2)}
    assert len(ids) == 1, "one topic id for the topic's partitions"
    run_json(capsys, tmp_path, "--topics", "1", "--partitions", "3", "--records", "10")
    assert (tmp_path / "gen-0-2" / "partition.metadata").read_text() in ids, "an added partition too"
    names = {p.name for p in (tmp_path / "gen-0-0").iterdir()}
    assert {"leader-epoch-checkpoint", "partition.metadata", "00000000000000000510.snapshot"} <= names

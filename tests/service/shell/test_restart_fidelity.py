"""A directory ``serve`` stopped cleanly is what a broker leaves: an open transaction survives the restart,
and the partition holds exactly a broker's files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.base.clock import SystemClock
from service.shell.cli import main
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.partition_metadata import write_partition_metadata
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.serve_process import READY, Serve

OVERRIDES = ("log.cleanup.policy=compact", "log.cleaner.enable=false", "log.segment.bytes=500")
TXN_FIRST_OFFSET = 10


def write_log_with_an_open_transaction(log_dir: Path) -> None:
    directory = log_dir / "orders-0"
    directory.mkdir(parents=True)
    write_partition_metadata(directory, "AAAAAAAAAAEAAAAAAAAAAg")
    config = LogConfig(segment_bytes=500, cleanup_policy=frozenset({"compact"}))
    loaded = load_log_dir(log_dir, lambda _t: config, clock=SystemClock())
    log = loaded.logs[TopicPartition("orders", 0)]
    now = SystemClock().now_ms()
    for i in range(TXN_FIRST_OFFSET):
        log.append_records([Record(0, now, b"k%d" % (i % 3), b"v%d" % i)])
    log.append_records(
        [Record(0, now, b"t", b"open")],
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    for i in range(10):
        log.append_records([Record(0, now, b"k%d" % (i % 3), b"w%d" % i)], producer_id=6, base_sequence=i)
    close_log_dir(loaded)


def explain(capsys: pytest.CaptureFixture[str], log_dir: Path) -> dict[str, object]:
    args = ["explain", "--json", "--override", f"log.dirs={log_dir}"]
    for override in OVERRIDES:
        args += ["--override", override]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    [doc] = json.loads(out)["partitions"]
    assert isinstance(doc, dict)
    return doc


@pytest.mark.slow
def test_an_open_transaction_and_explain_survive_a_clean_serve_restart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_dir = tmp_path / "logs"
    write_log_with_an_open_transaction(log_dir)
    before = explain(capsys, log_dir)
    assert before["last_stable_offset"] == TXN_FIRST_OFFSET
    cleaner = before["cleaner"]
    assert isinstance(cleaner, dict) and cleaner["first_uncleanable_offset"] <= TXN_FIRST_OFFSET
    assert before["topic_id"] == "AAAAAAAAAAEAAAAAAAAAAg"

    serve = Serve(log_dir, *OVERRIDES)
    serve.wait_for(READY)
    assert serve.stop() == 0, serve.log

    assert explain(capsys, log_dir) == before
    directory = log_dir / "orders-0"
    names = sorted(p.name for p in directory.iterdir())
    kinds = {n.split(".", 1)[1] if n[0].isdigit() else n for n in names}
    assert kinds == {"log", "index", "timeindex", "snapshot", "leader-epoch-checkpoint", "partition.metadata"}
    bases = sorted(n.split(".")[0] for n in names if n.endswith(".log"))
    for base in bases:  # a broker's files per segment (no .txnindex: nothing was aborted)
        assert {f"{base}.log", f"{base}.index", f"{base}.timeindex"} <= set(names)
    snapshots = sorted(n.split(".")[0] for n in names if n.endswith(".snapshot"))
    assert snapshots[:-1] == bases[1:]  # one per roll, named by the new segment's base offset
    assert int(snapshots[-1]) == 21  # and the one taken at the log end offset on close
    assert (directory / "partition.metadata").read_bytes() == b"version: 0\ntopic_id: AAAAAAAAAAEAAAAAAAAAAg"

"""``logcleaner serve`` as a real subprocess: clean shutdown on SIGTERM, the dir lock, recovery on restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from service.base.clock import SystemClock
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.clean_shutdown import read_clean_shutdown_marker
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.paths import REPO
from tests.service.serve_process import READY, Serve, write_log


@pytest.mark.slow
def test_sigterm_shuts_down_cleanly_and_a_second_instance_is_refused(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    write_log(log_dir, 30)
    serve = Serve(log_dir)
    serve.wait_for(READY)
    second = subprocess.run(
        [
            sys.executable,
            "-m",
            "service",
            "serve",
            "--override",
            f"log.dirs={log_dir}",
            "--override",
            "api.port=0",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1  # a start-up failure (the dir is locked), not bad input
    assert str(log_dir) in second.stderr and "another" in second.stderr
    assert len(second.stderr.splitlines()) == 1, f"one line per failure:\n{second.stderr}"
    assert second.stderr.startswith("logcleaner: error: ")
    assert serve.stop() == 0, serve.log
    assert read_clean_shutdown_marker(log_dir) is not None
    recovery_points = OffsetCheckpointFile(log_dir / "recovery-point-offset-checkpoint").read()
    assert recovery_points == {TopicPartition("orders", 0): 30}


@pytest.mark.slow
def test_sigkill_then_restart_recovers(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    write_log(log_dir, 20)
    serve = Serve(log_dir)
    serve.wait_for(READY)
    serve.stop(signal.SIGKILL)
    assert read_clean_shutdown_marker(log_dir) is None, "no marker after a kill"
    with open(sorted((log_dir / "orders-0").glob("*.log"))[-1], "ab") as f:
        f.write(os.urandom(23))  # a torn write at the tail
    serve = Serve(log_dir)
    serve.wait_for(READY)
    assert serve.stop(signal.SIGINT) == 0, serve.log
    assert "truncating" in serve.log
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=500), clock=SystemClock())
    log = loaded.logs[TopicPartition("orders", 0)]
    assert log.log_end_offset == 20
    assert [r.value for r in log.read(0, 100)] == [b"v%d" % i for i in range(20)]


def wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


@pytest.mark.slow
def test_the_scheduler_deletes_expired_segments_then_restarts_clean_and_recovers(tmp_path: Path) -> None:
    """Records that expire while the daemon runs are deleted by the real ``kafka-log-retention`` task."""
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / "events-0").mkdir()
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=400), clock=SystemClock())
    log = loaded.logs[TopicPartition("events", 0)]
    stamp = SystemClock().now_ms()
    for i in range(40):
        log.append_records([Record(0, stamp, b"k%d" % i, b"v%d" % i)])
    segments_before = len(log.segments)
    close_log_dir(loaded)
    partition = log_dir / "events-0"
    fast = (
        "scheduler.initial.delay.ms=200",
        "log.retention.check.interval.ms=300",
        "log.retention.ms=2000",
        "log.segment.delete.delay.ms=300",
        "log.flush.offset.checkpoint.interval.ms=300",
    )
    serve = Serve(log_dir, *fast)
    try:
        wait_until(
            lambda: len(list(partition.glob("*.log"))) == 1, "retention to delete every expired segment"
        )
        wait_until(lambda: not list(partition.glob("*.deleted")), "the .deleted files to be removed")
    finally:
        returncode = serve.stop()
    assert returncode == 0, serve.log
    assert segments_before > 2
    assert "due to log retention time 2000ms breach based on the largest record timestamp" in serve.log
    assert read_clean_shutdown_marker(log_dir) is not None
    assert OffsetCheckpointFile(log_dir / "recovery-point-offset-checkpoint").read() == {
        TopicPartition("events", 0): 40
    }
    assert OffsetCheckpointFile(log_dir / "log-start-offset-checkpoint").read() == {}, "start == first base"
    [remaining] = partition.glob("*.log")
    assert remaining.name == "00000000000000000040.log", "rolled at the log end offset before deleting all"

    serve = Serve(log_dir, *fast)
    serve.wait_for(READY)
    serve.stop(signal.SIGKILL)
    assert read_clean_shutdown_marker(log_dir) is None
    serve = Serve(log_dir, *fast)
    serve.wait_for(READY)
    assert serve.stop() == 0, serve.log
    assert "Recovering unflushed segment" in serve.log
    assert read_clean_shutdown_marker(log_dir) is not None


@pytest.mark.slow
def test_serve_creates_a_missing_log_dir_and_says_so(tmp_path: Path) -> None:
    log_dir = tmp_path / "new" / "logs"
    serve = Serve(log_dir)
    serve.wait_for(READY)
    assert serve.stop() == 0, serve.log
    assert log_dir.is_dir()
    assert f"Created the missing log dir {log_dir}" in serve.log


@pytest.mark.slow
def test_records_acknowledged_before_a_sigkill_are_served_after_it(tmp_path: Path) -> None:
    """The high-watermark checkpoint written before the produce (empty, at once) must not hide the records
    acknowledged after it: logcleaner leads its own logs alone, so the high watermark is the log end at
    load, as Kafka's leader sets it."""
    import httpx

    from tests.service.stop_helpers import api_url, fetch_all

    log_dir = tmp_path / "logs"
    overrides = ("scheduler.initial.delay.ms=0", "replica.high.watermark.checkpoint.interval.ms=600000")
    serve = Serve(log_dir, *overrides)
    serve.wait_for(READY)
    with httpx.Client(base_url=api_url(serve), timeout=30) as client:
        wait_until(lambda: (log_dir / "replication-offset-checkpoint").exists(), "the first checkpoint")
        assert client.post("/v1/topics", json={"name": "o", "partitions": 1}).status_code == 201
        body = {"records": [{"key": {"type": "STRING", "data": f"k{i}"}} for i in range(2)]}
        produced = client.post("/v1/topics/o/partitions/0/records", json=body)
        assert produced.status_code == 200, produced.text
    assert serve.stop(signal.SIGKILL) == -signal.SIGKILL
    serve = Serve(log_dir)
    serve.wait_for(READY)
    with httpx.Client(base_url=api_url(serve), timeout=30) as client:
        partition = client.get("/v1/topics/o/partitions/0").json()
        assert (partition["high_watermark"], partition["high_watermark_source"]) == (2, "leader-log-end")
        assert sorted(fetch_all(client, "o", 0)) == [0, 1]
    assert serve.stop() == 0, serve.log

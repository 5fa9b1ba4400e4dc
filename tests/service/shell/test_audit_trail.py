"""The audit trail of ``serve`` at the default level: one line per action that changes data, in Kafka's
words, and none of the other modules' INFO lines; ``-q`` hides it."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import httpx
import pytest

from service.base.clock import SystemClock
from service.storage.clean_shutdown import read_clean_shutdown_marker
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.serve_process import Serve, free_port
from tests.service.stop_helpers import wait_until

FAST = (
    "scheduler.initial.delay.ms=100",
    "log.retention.check.interval.ms=200",
    "log.segment.delete.delay.ms=200",
    "log.cleaner.backoff.ms=100",
    "producer.id.expiration.check.interval.ms=200",
    "producer.id.expiration.ms=1000",
)


def write_crashed_log(log_dir: Path) -> None:
    """``events-0``: 1970 timestamps from producer 7, in 500-byte segments; no clean shutdown, a torn tail."""
    (log_dir / "events-0").mkdir(parents=True)
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=500), clock=SystemClock())
    log = loaded.logs[TopicPartition("events", 0)]
    for i in range(30):
        log.append_records([Record(0, 1000 + i, b"k%d" % i, b"v%d" % i)], producer_id=7, base_sequence=i)
    close_log_dir(loaded)
    (log_dir / ".kafka_cleanshutdown").unlink()
    assert read_clean_shutdown_marker(log_dir) is None
    with open(sorted((log_dir / "events-0").glob("*.log"))[-1], "ab") as tail:
        tail.write(os.urandom(23))


def serve_at_default_level(log_dir: Path, port: int, *flags: str) -> Serve:
    command = [sys.executable, "-m", "service", "serve", *flags, "--override", f"log.dirs={log_dir}"]
    command += ["--override", f"api.port={port}"]
    for override in FAST:
        command += ["--override", override]
    return Serve(log_dir, command=command)


def string(text: str) -> dict[str, str]:
    return {"type": "STRING", "data": text}


@pytest.mark.slow
def test_serve_logs_every_data_change_at_the_default_level_and_no_chatter(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    write_crashed_log(log_dir)
    port = free_port()
    serve = serve_at_default_level(log_dir, port)
    try:
        serve.wait_for("logcleaner started")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}/v1", timeout=30) as client:
            created = client.post(
                "/topics",
                json={
                    "name": "keys",
                    "partitions": 1,
                    "configs": {"cleanup.policy": "compact", "segment.bytes": 300},
                },
            )
            assert created.status_code == 201, created.text
            records = [{"key": string(f"k{i % 3}"), "value": string(f"v{i}")} for i in range(60)]
            for record in records:
                assert client.post("/topics/keys/partitions/0/records", json={"records": [record]}).is_success
            assert client.post("/topics", json={"name": "scratch", "partitions": 1}).status_code == 201
            assert client.post(
                "/topics/scratch/partitions/0/records", json={"records": records[:10]}
            ).is_success
            moved = client.post("/topics/scratch/partitions/0/delete-records", json={"before_offset": 4})
            assert moved.status_code == 200, moved.text
            assert client.delete("/topics/scratch").status_code == 202
        serve.wait_for("Deleted log for partition scratch-0 in ")
        serve.wait_for("cleaned log keys-0 in ")
        serve.wait_for("Expired 1 producer id")
    finally:
        code = serve.stop(signal.SIGTERM)
    log = serve.log
    assert code == 0, log
    audit = [line for line in log.splitlines() if " INFO logcleaner.audit: " in line]
    ident = f"[UnifiedLog partition=events-0, dir={log_dir}]"

    def one(pattern: str) -> str:
        found = [line for line in audit if re.search(pattern, line)]
        assert found, f"no audit line matches {pattern!r}:\n{log}"
        return found[0]

    recovered = one(r"partition=events-0.*Recovered the log from offset 24 \(no clean shutdown recorded, ")
    assert recovered.endswith("recovery point 30): 1 segment scanned, 23 bytes truncated, log end offset 30")
    deleted = one(r"Deleting segment LogSegment\(baseOffset=0, size=\d+, lastModifiedTime=\d+, ")
    assert ident in deleted
    assert deleted.endswith(
        "largestRecordTimestamp=1005) due to log retention time 604800000ms breach based on the largest "
        "record timestamp in the segment"
    )
    one(r"Created log for partition keys-0 in .*/keys-0 \(topic id \S+\)")
    one(
        r"partition=scratch-0, .* Incremented log start offset from 0 to 4 due to client delete records "
        r"request$"
    )
    one(r"Log for partition scratch-0 is renamed to .*/scratch-0\.\w+-delete and is scheduled for deletion")
    one(r"Deleted log for partition scratch-0 in .*scratch-0\.\w+-delete$")
    one(rf"{re.escape(ident)} Expired 1 producer id idle for 1000 ms or more .*: 7$")
    cleaned = one(r"cleaned log keys-0 in ")
    assert re.search(
        r"\(dirty section = \[0, \d+\]\) on the in-process engine: \d+ bytes read, \d+ bytes written, "
        r"\d+ records read, [1-9]\d* removed, in \d+\.\d\d s$",
        cleaned,
    ), cleaned
    info_loggers = set(re.findall(r" INFO (\S+): ", log))
    assert info_loggers == {"logcleaner.audit", "service.shell.daemon"}, log
    assert "Log cleaner thread" not in log and "Recovering unflushed segment" not in log  # -v's chatter


@pytest.mark.slow
def test_serve_q_hides_the_audit_trail(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    write_crashed_log(log_dir)
    serve = serve_at_default_level(log_dir, free_port(), "-q")
    partition = log_dir / "events-0"
    try:
        wait_until(
            lambda: len(list(partition.glob("*.log"))) == 1, "retention to delete the expired segments"
        )
    finally:
        code = serve.stop()
    assert code == 0, serve.log
    assert " INFO " not in serve.log and "logcleaner.audit" not in serve.log
    assert "WARNING service.storage.segment: Found invalid bytes" in serve.log, "warnings stay"

"""``GET /v1/explain/summary`` on a real daemon: the document ``explain --summary`` prints, kept ready by
the scheduled task (it follows appends and retention at the next refresh), its figures on ``/metrics``, and
the compaction estimate from the daemon's key sketches within 5% of what ``clean`` then frees."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from service.base.clock import ManualClock
from service.core.summary import MEMO_MAX_AGE_MS
from service.shell.cli import main
from service.storage.records import Record
from tests.api.conftest import serve_daemon, string_record
from tests.api.metrics_helpers import Scrape, running_daemon


def log_bytes(log_dir: Path) -> int:
    return sum(p.stat().st_size for p in log_dir.rglob("*.log"))


def check_sums(doc: dict[str, Any]) -> None:
    assert sum(h["bytes"] for h in doc["held"]) == doc["total_bytes"]
    assert set(doc) == {"total_bytes", "partitions", "held", "reclaimable", "generated_at"}


def test_the_summary_follows_the_logs_at_each_refresh(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    with serve_daemon(log_dir, {"log.segment.bytes": "200"}) as served:
        client = served.client
        summary = served.daemon.view.summary
        deadline = time.monotonic() + 30
        while summary.latest() is None:  # the first refresh runs as the scheduler starts, unasked
            assert time.monotonic() < deadline, "no summary within 30 s of the start"
            time.sleep(0.05)
        assert client.post("/v1/topics", json={"name": "events", "partitions": 2}).status_code == 201
        assert client.get("/v1/explain/summary").json()["partitions"] == 0, "ready-made: not per request"
        summary.refresh()  # the scheduled task's run
        first = client.get("/v1/explain/summary")
        assert first.status_code == 200, first.text
        check_sums(first.json())
        assert first.json()["partitions"] == 2
        for i in range(6):
            records = {"records": [string_record(f"k{i}", "v" * 50)]}
            assert client.post("/v1/topics/events/partitions/0/records", json=records).status_code == 200
        assert client.get("/v1/explain/summary").json() == first.json(), "ready-made: not per request"

        served.daemon.view.summary.refresh()  # the scheduled task's run
        doc = client.get("/v1/explain/summary").json()
        check_sums(doc)
        assert doc["total_bytes"] == log_bytes(log_dir) > first.json()["total_bytes"]
        reasons = {h["reason"] for h in doc["held"]}
        assert reasons <= {"within-retention", "active-segment"}

        scrape = Scrape.of(served.daemon.metrics_registry)
        held = {
            dict(labels)["reason"]: value for labels, value in scrape.series("logcleaner_bytes_held").items()
        }
        assert sum(held.values()) == doc["total_bytes"]
        assert scrape.value("logcleaner_bytes_reclaimable", by="retention") == 0


@pytest.mark.parametrize("batch_size", ["1", "25"])
def test_the_daemon_estimate_is_within_5_percent_of_what_clean_frees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], batch_size: str
) -> None:
    log_dir = tmp_path / "logs"
    gen = ["gen", "--log-dir", str(log_dir), "--cleanup-policy", "compact", "--segment-bytes", "50000"]
    assert (
        main([*gen, "--partitions", "3", "--records", "6000", "--keys", "700", "--batch-size", batch_size])
        == 0
    )
    with serve_daemon(log_dir, {"log.cleaner.min.cleanable.ratio": "1"}) as served:  # cleans none
        summary = served.daemon.view.summary
        doc = summary.refresh()
        for _ in range(10):
            if doc["reclaimable"]["compaction_unestimated_bytes"] == 0:  # type: ignore[index]
                break
            doc = summary.refresh()
    reclaimable = doc["reclaimable"]
    assert isinstance(reclaimable, dict)
    assert reclaimable["compaction_unestimated_bytes"] == 0 and reclaimable["compaction_estimated"] is True
    # offline, from the sketches the daemon left in its sketch file: the same estimate, no record read
    capsys.readouterr()
    offline = ["explain", "--summary", "--json", "--override", f"log.dirs={log_dir}"]
    assert main([*offline, "--override", "log.cleaner.min.cleanable.ratio=1"]) == 0
    assert json.loads(capsys.readouterr().out)["reclaimable"] == reclaimable
    before = log_bytes(log_dir)
    assert main(["clean", "--override", f"log.dirs={log_dir}"]) == 0
    freed = before - log_bytes(log_dir)
    capsys.readouterr()
    assert freed > 0
    assert abs(reclaimable["compaction"] - freed) <= 0.05 * freed, (reclaimable["compaction"], freed)


def test_time_alone_moves_a_verdict_within_a_minute(tmp_path: Path) -> None:
    """An unchanged partition keeps its figures between refreshes, but for a minute at most: a segment
    coming due for time retention shows without any change to the log."""
    clock = ManualClock()
    hour_ms = 3_600_000
    with running_daemon([tmp_path / "logs"], {"log.retention.ms": str(hour_ms)}, clock=clock) as daemon:
        [log] = daemon.log_manager.create_topic("aging", 1)
        log.append_records([Record(0, clock.now_ms() - hour_ms + 10_000, b"k", b"v")])  # due in 10 s
        log.roll()
        summary = daemon.view.summary

        def reasons() -> set[str]:
            held = summary.refresh()["held"]
            assert isinstance(held, list)
            return {str(h["reason"]) for h in held}

        assert "within-retention" in reasons()
        clock.advance(20_000)
        assert "time" not in reasons(), "unchanged for under a minute: the figures are reused"
        clock.advance(MEMO_MAX_AGE_MS)
        assert "time" in reasons()

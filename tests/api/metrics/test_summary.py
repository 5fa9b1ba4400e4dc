"""The summary's figures on ``/metrics`` (``api/metrics/summary.py``): the ready document's bytes by reason
and reclaimable bytes, read at each scrape."""

from __future__ import annotations

from pathlib import Path

from service.base.clock import ManualClock
from service.storage.records import Record
from tests.api.metrics_helpers import Scrape, running_daemon

DAY_MS = 86_400_000


def test_the_scrape_reads_the_ready_document(tmp_path: Path) -> None:
    clock = ManualClock()
    overrides = {"log.segment.bytes": "100", "log.retention.ms": str(DAY_MS)}
    with running_daemon([tmp_path], overrides, clock=clock) as daemon:
        [log] = daemon.log_manager.create_topic("orders", 1)
        for timestamp in (clock.now_ms() - 2 * DAY_MS, clock.now_ms(), clock.now_ms()):
            log.append_records([Record(0, timestamp, None, b"value")])
        document = daemon.view.summary.refresh()  # the scheduled task's run
        after = Scrape.of(daemon.metrics_registry)

    assert isinstance(document["held"], list) and isinstance(document["reclaimable"], dict)
    held = {dict(labels)["reason"]: value for labels, value in after.series("logcleaner_bytes_held").items()}
    assert held == {entry["reason"]: entry["bytes"] for entry in document["held"]}
    assert sum(held.values()) == document["total_bytes"]
    assert held.keys() == {"time", "within-retention", "active-segment"}
    assert held["time"] > 0, "the two-day-old segment is due"
    assert (
        after.value("logcleaner_bytes_reclaimable", by="retention")
        == document["reclaimable"]["retention_now"]
    )
    assert after.value("logcleaner_bytes_reclaimable", by="retention") == held["time"]
    assert after.value("logcleaner_bytes_reclaimable", by="compaction") == 0

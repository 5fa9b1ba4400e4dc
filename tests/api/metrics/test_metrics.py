"""The metrics on a real daemon over real logs: every name is exported, promtool accepts the exposition,
the retention figures follow the live logs, and ``/metrics`` serves them over HTTP."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx

from service.base.clock import ManualClock
from service.storage.log import PartitionLog
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.api.conftest import Served, string_record
from tests.api.metrics_helpers import (
    CONTRACT_NAME_EXCEPTIONS,
    CONTRACT_NAMES,
    Scrape,
    busy_scrape,
    promtool,
    running_daemon,
)

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
ONE_RECORD_SEGMENTS = {"log.segment.bytes": "100"}  # one ~73-byte batch per segment


def append(log: PartitionLog, *timestamps: int, key: bytes | None = None) -> None:
    """One batch of one record per timestamp given."""
    for timestamp in timestamps:
        log.append_records([Record(0, timestamp, key, b"value")])


def test_every_contract_name_is_exported_with_its_type(tmp_path: Path) -> None:
    scrape = busy_scrape(tmp_path)

    missing = [name for name in CONTRACT_NAMES if name not in scrape.values and name not in scrape.types]
    assert missing == []
    for name in CONTRACT_NAMES:
        if name.endswith("_total"):
            assert scrape.types[name.removesuffix("_total")] == "counter", name
            assert name in scrape.values
        elif name.endswith("_seconds"):
            assert scrape.types[name] == "histogram", name
            assert f"{name}_bucket" in scrape.values
        else:
            assert scrape.types[name] == "gauge", name
            assert name in scrape.values, f"{name} has no sample"
    assert scrape.value("logcleaner_spark_job_duration_seconds_count") == 1
    assert scrape.value("logcleaner_spark_job_duration_seconds_sum") == 2.5


def test_promtool_accepts_the_exposition(tmp_path: Path) -> None:
    clock = ManualClock()
    with running_daemon([tmp_path / "a", tmp_path / "b"], ONE_RECORD_SEGMENTS, clock=clock) as daemon:
        for log in daemon.log_manager.create_topic("orders", 3):
            append(log, clock.now_ms() - DAY_MS, clock.now_ms() + DAY_MS, clock.now_ms())
        daemon.metrics.on_job_outcome("kafka-log-retention", "failure", 0.25)
        daemon.metrics.observe_spark_job(12.0)
        assert daemon.api_server is not None
        text = httpx.get(f"{daemon.api_server.url}/metrics", timeout=60).text  # what Prometheus reads

    result = promtool("check", "metrics", stdin=text)

    findings = {line.strip() for line in (result.stdout + result.stderr).splitlines() if line.strip()}
    assert result.returncode == 3, findings  # 3: lint findings only, no parse error
    # exactly the names kept for Kafka's sake (docs/metrics.md): a new finding fails, and so does one fixed
    assert findings == CONTRACT_NAME_EXCEPTIONS


def test_retention_deletions_are_counted_by_reason(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.now_ms()
    with running_daemon([tmp_path], ONE_RECORD_SEGMENTS, clock=clock) as daemon:
        [timed] = daemon.log_manager.create_topic("timed", 1)
        [sized] = daemon.log_manager.create_topic("sized", 1)
        [trimmed] = daemon.log_manager.create_topic("trimmed", 1)
        daemon.topic_store.update("timed", {"retention.ms": HOUR_MS})
        daemon.topic_store.update("sized", {"retention.bytes": 250})  # of about 440
        daemon.refresh_topic_configs()
        append(timed, now - DAY_MS, now - DAY_MS, now)
        append(sized, *[now] * 6)
        append(trimmed, *[now] * 4)
        trimmed.increment_log_start_offset(2)
        before = Scrape.of(daemon.metrics_registry)

        deleted = daemon.log_manager.cleanup_logs()
        deleted += daemon.log_manager.cleanup_logs()  # nothing more: counts do not move
        after = Scrape.of(daemon.metrics_registry)

    by_reason = Counter(str(d.reason) for d in deleted)
    assert set(by_reason) == {"time", "size", "log-start-offset"}, deleted
    for reason in ("time", "size", "log-start-offset"):
        assert before.value("logcleaner_retention_deleted_segments_total", reason=reason) == 0
        assert after.value("logcleaner_retention_deleted_segments_total", reason=reason) == by_reason[reason]
    assert after.types["logcleaner_retention_deleted_segments"] == "counter"


def test_a_running_daemon_serves_them_over_http(served: Served, topic: str) -> None:
    records = {"records": [string_record("k", "v"), string_record("k", "w")]}
    produced = served.client.post(f"/v1/topics/{topic}/partitions/0/records", json=records)
    assert produced.status_code == 200, produced.text

    response = served.client.get("/metrics")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    scrape = Scrape.parse(response.text)
    log = served.daemon.log_manager.get_log(TopicPartition(topic, 0))
    assert scrape.value("kafka_log_log_logendoffset", topic=topic, partition="0") == log.log_end_offset == 2
    assert scrape.value("kafka_log_log_size", topic=topic, partition="0") == log.size_bytes
    assert set(CONTRACT_NAMES) - {"logcleaner_retention_future_timestamp_segments"} <= scrape.names

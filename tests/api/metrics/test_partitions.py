"""The per-partition gauges (``api.metrics.partitions``) on a real daemon over real logs: Kafka's four
``Log`` gauges follow the live logs and leave with a deleted topic; the future-timestamp count is exactly the
segments ``explain`` names, and a log without any has no series. (The figures themselves are tested in
``tests/service/core/test_partition_figures.py``; the direct text lines in ``test_exposition.py``.)"""

from __future__ import annotations

from pathlib import Path

from service.base.clock import ManualClock
from service.core.explain import explain_partition
from service.storage.log import PartitionLog
from service.storage.records import Record
from tests.api.metrics_helpers import (
    Scrape,
    running_daemon,
)

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
ONE_RECORD_SEGMENTS = {"log.segment.bytes": "100"}  # one ~73-byte batch per segment


def append(log: PartitionLog, *timestamps: int) -> None:
    """One batch of one record per timestamp given."""
    for timestamp in timestamps:
        log.append_records([Record(0, timestamp, None, b"value")])


def test_partition_gauges_follow_the_live_logs(tmp_path: Path) -> None:
    clock = ManualClock()
    with running_daemon([tmp_path], ONE_RECORD_SEGMENTS, clock=clock) as daemon:
        first, second = daemon.log_manager.create_topic("orders", 2)
        append(first, *[clock.now_ms()] * 5)
        append(second, clock.now_ms())
        first.increment_log_start_offset(3)

        def assert_gauges_match() -> Scrape:
            scrape = Scrape.of(daemon.metrics_registry)
            for log in (first, second):
                labels = {"topic": "orders", "partition": str(log.topic_partition.partition)}
                assert scrape.value("kafka_log_log_size", **labels) == log.size_bytes > 0
                assert scrape.value("kafka_log_log_numlogsegments", **labels) == len(log.segments)
                assert scrape.value("kafka_log_log_logstartoffset", **labels) == log.log_start_offset
                assert scrape.value("kafka_log_log_logendoffset", **labels) == log.log_end_offset
            return scrape

        scrape = assert_gauges_match()
        assert scrape.value("kafka_log_log_logstartoffset", topic="orders", partition="0") == 3
        assert scrape.value("kafka_log_log_numlogsegments", topic="orders", partition="0") == 5

        append(second, *[clock.now_ms()] * 3)  # read live at each scrape
        assert assert_gauges_match().value("kafka_log_log_logendoffset", topic="orders", partition="1") == 4

        daemon.log_manager.delete_topic("orders")
        assert Scrape.of(daemon.metrics_registry).series("kafka_log_log_size") == {}


def test_future_timestamp_segments_are_those_explain_names(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.now_ms()
    overrides = {**ONE_RECORD_SEGMENTS, "log.retention.ms": str(HOUR_MS)}
    with running_daemon([tmp_path], overrides, clock=clock) as daemon:
        stamped, plain, no_timestamps = daemon.log_manager.create_topic("events", 3)
        # expired, expired, a day ahead, expired, two days ahead, and the active segment (now)
        append(stamped, now - DAY_MS, now - DAY_MS, now + DAY_MS, now - DAY_MS, now + 2 * DAY_MS, now)
        append(plain, now - DAY_MS, now)
        append(no_timestamps, -1, -1)  # no record timestamp: a segment ages by its file's mtime
        ahead, active = no_timestamps.segments
        ahead.set_last_modified_ms(now + DAY_MS)
        active.set_last_modified_ms(now)  # the file system set the wall clock's time

        def future_segments(log: PartitionLog) -> float | None:
            tp = log.topic_partition
            return Scrape.of(daemon.metrics_registry).value(
                "logcleaner_retention_future_timestamp_segments", topic=tp.topic, partition=str(tp.partition)
            )

        def explained(log: PartitionLog) -> int:
            doc = explain_partition(log, now_ms=clock.now_ms(), cleaner_enabled=True, cleaner_checkpoints={})
            segments = doc["segments"]
            assert isinstance(segments, list)
            return sum(1 for s in segments if s["reason"] == "future-timestamp")

        assert future_segments(stamped) == explained(stamped) == 2
        assert future_segments(no_timestamps) == explained(no_timestamps) == 1
        assert future_segments(plain) is None and explained(plain) == 0  # no series without any

        deleted = daemon.log_manager.cleanup_logs()
        assert [(d.topic, d.base_offset) for d in deleted] == [("events", 0), ("events", 1), ("events", 0)]
        assert future_segments(stamped) == explained(stamped) == 2  # they hold back what follows

        clock.advance(DAY_MS + 1)
        assert future_segments(stamped) == explained(stamped) == 1
        clock.advance(DAY_MS)
        assert future_segments(stamped) is None and explained(stamped) == 0

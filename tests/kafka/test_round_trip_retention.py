"""Retention on a real broker's dir: ``logcleaner retention`` (and ``serve``'s scheduled tasks) delete by
time, by size and below a log start offset that DeleteRecords moved; the broker then starts at the log
start offsets logcleaner left, and a consumer from the beginning starts there."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from tests.kafka.broker import KafkaBroker
from tests.kafka.checks import assert_started_cleanly, segment_base_offsets
from tests.kafka.clients import (
    QUIET,
    TIMEOUT_S,
    ConsumedRecord,
    ProducedRecord,
    create_topic,
    low_watermarks,
    produce,
    read_topic,
)
from tests.kafka.conftest import MakeBroker
from tests.kafka.round_trip import active_segment_base, differences
from tests.kafka.run_logcleaner import log_dir_options, logcleaner_json
from tests.kafka.workloads import SEGMENT_MS, kept_by_compaction, keyed_chunks
from tests.service.serve_process import Serve
from tests.service.stop_helpers import api_url, wait_until

pytestmark = pytest.mark.kafka

DAY_MS = 86_400_000
RETENTION_MS = 2 * DAY_MS
BY_TIME = {"retention.ms": str(RETENTION_MS), "segment.ms": str(SEGMENT_MS)}
BY_SIZE = {"retention.bytes": "20000", "segment.ms": str(SEGMENT_MS)}
BY_START_OFFSET = {"segment.ms": str(SEGMENT_MS)}


def aged_chunks(seed: int) -> list[list[ProducedRecord]]:
    """Four chunks 6 to 3 days old, which time retention deletes, then three recent ones; each a segment."""
    now = int(time.time() * 1000)
    starts = [now - days * DAY_MS for days in (6, 5, 4, 3)] + [now - 3_600_000, now - 60_000, now]
    return [keyed_chunks(chunks=1, seed=seed + i, start_ms=start)[0] for i, start in enumerate(starts)]


def size_retention_start(partition_dir: Path, retention_bytes: int) -> int:
    """Kafka's rule (``UnifiedLog.deleteRetentionSizeBreachedSegments``): from the oldest segment, delete
    while the log stays at least ``retention_bytes`` without it; never the active segment. The new log
    start offset is the first kept segment's base."""
    bases = segment_base_offsets(partition_dir)
    sizes = [(partition_dir / f"{base:020d}.log").stat().st_size for base in bases]
    excess = sum(sizes) - retention_bytes
    start = bases[0]
    for size, next_base in zip(sizes, bases[1:], strict=False):
        if excess - size < 0:
            break
        excess -= size
        start = next_base
    return start


def from_offset(records: Sequence[ConsumedRecord], start: int) -> list[ConsumedRecord]:
    return [r for r in records if r.offset >= start]


def delete_records(broker: KafkaBroker, topic: str, before_offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, **QUIET})
    futures = admin.delete_records([TopicPartition(topic, 0, before_offset)], request_timeout=TIMEOUT_S)
    for future in futures.values():
        future.result()


def test_retention_deletes_by_time_size_and_log_start_offset_and_the_broker_starts_where_it_left_off(
    make_broker: MakeBroker,
) -> None:
    broker = make_broker()
    configs = {"by-time": BY_TIME, "by-size": BY_SIZE, "by-start-offset": BY_START_OFFSET}
    before = {}
    for seed, (topic, config) in enumerate(configs.items()):
        create_topic(broker.bootstrap_servers, topic, config=config)
        produce(broker.bootstrap_servers, topic, aged_chunks(seed * 10), compression="lz4")
        before[topic] = read_topic(broker.bootstrap_servers, topic)
    start_offset_target = before["by-start-offset"][len(before["by-start-offset"]) // 2].offset
    delete_records(broker, "by-start-offset", start_offset_target)
    broker.stop()

    bases = {topic: segment_base_offsets(broker.log_dir / f"{topic}-0") for topic in configs}
    assert all(len(b) == 7 for b in bases.values()), bases
    expected_start = {
        "by-time": bases["by-time"][4],
        "by-size": size_retention_start(broker.log_dir / "by-size-0", int(BY_SIZE["retention.bytes"])),
        "by-start-offset": start_offset_target,
    }
    assert bases["by-size"][0] < expected_start["by-size"] < bases["by-size"][-1], "size retention must act"
    deleted = logcleaner_json("retention", *log_dir_options(broker.log_dir))["deleted"]
    reasons = {(d["topic"], d["reason"]) for d in deleted}
    assert reasons == {("by-time", "time"), ("by-size", "size"), ("by-start-offset", "log-start-offset")}, (
        deleted
    )

    broker.start()
    assert_started_cleanly(broker)
    for topic, start in expected_start.items():
        assert low_watermarks(broker.bootstrap_servers, topic) == [start], topic
        expected = from_offset(before[topic], start)
        found = differences(expected, read_topic(broker.bootstrap_servers, topic))
        assert not found, f"{topic}: {found}"


def test_serve_runs_retention_and_the_cleaner_on_a_broker_dir_and_the_broker_serves_the_result(
    make_broker: MakeBroker,
) -> None:
    broker = make_broker()
    compact = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS)}
    create_topic(broker.bootstrap_servers, "served-compact", config=compact)
    produce(broker.bootstrap_servers, "served-compact", keyed_chunks(seed=3), compression="snappy")
    create_topic(broker.bootstrap_servers, "served-by-time", config=BY_TIME)
    produce(broker.bootstrap_servers, "served-by-time", aged_chunks(40), compression="gzip")
    before = {t: read_topic(broker.bootstrap_servers, t) for t in ("served-compact", "served-by-time")}
    broker.stop()

    first_uncleanable = active_segment_base(broker, "served-compact")
    time_start = segment_base_offsets(broker.log_dir / "served-by-time-0")[4]
    serve = Serve(
        broker.log_dir,
        "log.cleaner.engine=in-process",
        "scheduler.initial.delay.ms=0",
        "log.retention.check.interval.ms=200",
        "log.cleaner.backoff.ms=100",
    )
    try:
        with httpx.Client(base_url=api_url(serve), timeout=10) as client:

            def partition(topic: str) -> dict[str, object]:
                response = client.get(f"/v1/topics/{topic}/partitions/0")
                return dict(response.json()) if response.status_code == 200 else {}

            wait_until(
                lambda: (
                    partition("served-compact").get("cleaner_checkpoint") == first_uncleanable
                    and partition("served-by-time").get("log_start_offset") == time_start
                ),
                "serve to clean served-compact and apply retention to served-by-time",
                serve=serve,
            )
    finally:
        assert serve.stop() == 0, serve.log

    broker.start()
    assert_started_cleanly(broker)
    assert low_watermarks(broker.bootstrap_servers, "served-by-time") == [time_start]
    found = {
        "served-compact": differences(
            kept_by_compaction(before["served-compact"], first_uncleanable),
            read_topic(broker.bootstrap_servers, "served-compact"),
        ),
        "served-by-time": differences(
            from_offset(before["served-by-time"], time_start),
            read_topic(broker.bootstrap_servers, "served-by-time"),
        ),
    }
    assert not any(found.values()), found

"""``LogManagerQueries`` (the ``LogQueries`` port) over real parts: a LogManager on real log dirs, the topic
overrides' store, a metadata source without a metadata log, a manual clock. Each question the routes ask is
answered here directly: topics and partition documents, the partition a produce or fetch uses, missing
topics and partitions named, overrides and effective configs, retention and explain documents, checkpoint
files, the log dirs' state. (The HTTP side of each is in ``tests/api/``.)"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.base.errors import NotFoundError
from service.config.broker_config import BrokerConfig
from service.config.topic_config import effective_log_config
from service.config.topic_store import TopicConfigStore
from service.core.log_manager import LogManager
from service.core.queries import LogManagerQueries
from service.core.tasks import ManualTaskScheduler
from service.metadata.source import MetadataSource
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log_config import LogConfig
from service.storage.log_files import CLEANER_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from service.storage.records import Record, encode_batch
from service.storage.topic_partition import TopicPartition
from tests.service.retention_helpers import START_MS

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


@dataclass(frozen=True, slots=True)
class Parts:
    queries: LogManagerQueries
    manager: LogManager
    store: TopicConfigStore
    clock: ManualClock
    log_dir: Path


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    log_dir = tmp_path / "logs"
    broker, _ = BrokerConfig.from_properties({"log.dirs": str(log_dir), "log.segment.bytes": "100"})
    clock = ManualClock(START_MS)
    store = TopicConfigStore(broker.log_dir_paths)
    metadata = MetadataSource(broker)

    def config_for(topic: str) -> LogConfig:
        return effective_log_config(broker, store.get(topic), topic=topic, dynamic=metadata.dynamic_configs)

    manager = LogManager(broker.log_dir_paths, config_for, clock=clock, scheduler=ManualTaskScheduler(clock))
    manager.startup()
    queries = LogManagerQueries(broker, manager, store, metadata, refresh=manager.apply_topic_configs)
    yield Parts(queries, manager, store, clock, log_dir.resolve())
    manager.shutdown()


def append(parts: Parts, tp: TopicPartition, *timestamps: int) -> None:
    """One batch of one keyed record per timestamp (with 100-byte segments, a segment each)."""
    log = parts.manager.get_log(tp)
    for n, timestamp in enumerate(timestamps):
        log.append_records([Record(0, timestamp, b"key-%d" % n, b"value")])


def test_topics_and_their_partitions_summaries(parts: Parts) -> None:
    parts.queries.create_topic("events", 2)
    append(parts, TopicPartition("events", 1), START_MS, START_MS)

    assert parts.queries.topics() == {"events": [0, 1]}
    doc = parts.queries.topic_logs("events")
    summaries = doc["partitions"]
    assert isinstance(summaries, list)
    assert [(s["partition"], s["log_end_offset"], s["segments"], s["offline"]) for s in summaries] == [
        (0, 0, 1, False),
        (1, 2, 2, False),
    ]
    assert {s["log_dir"] for s in summaries} == {str(parts.log_dir)}
    assert parts.queries.topic_logs("absent") == {"topic_id": None, "partitions": []}
    assert parts.queries.offline_partitions() == []


def test_the_partition_document_has_its_offsets_checkpoint_and_segments(parts: Parts) -> None:
    parts.queries.create_topic("profiles", 1)
    parts.queries.update_overrides("profiles", {"cleanup.policy": "compact"})
    parts.queries.refresh_topic_configs()
    tp = TopicPartition("profiles", 0)
    append(parts, tp, START_MS - HOUR_MS, START_MS, START_MS + 1)
    OffsetCheckpointFile(parts.log_dir / CLEANER_OFFSET_CHECKPOINT).write({tp: 1})

    doc = parts.queries.partition_document(tp)

    assert {k: doc[k] for k in ("topic", "partition", "log_start_offset", "log_end_offset")} == {
        "topic": "profiles",
        "partition": 0,
        "log_start_offset": 0,
        "log_end_offset": 3,
    }
    assert doc["log_dir"] == str(parts.log_dir)
    assert doc["cleanup_policy"] == "compact"
    assert doc["cleaner_checkpoint"] == 1
    assert doc["dirty_ratio"] == 0.5  # one clean segment, one dirty, the active one left out
    assert doc["segments"] == [
        {
            "base_offset": offset,
            "size_bytes": parts.manager.get_log(tp).segments[offset].size_bytes,
            "record_count": 1,
            "largest_timestamp": timestamp,
            "largest_timestamp_source": "record",
        }
        for offset, timestamp in enumerate((START_MS - HOUR_MS, START_MS, START_MS + 1))
    ]


def test_an_unreadable_cleaner_checkpoint_shows_as_none(parts: Parts) -> None:
    parts.queries.create_topic("events", 1)
    (parts.log_dir / CLEANER_OFFSET_CHECKPOINT).write_bytes(b"0\n1\nnot an entry\n")

    assert parts.queries.partition_document(TopicPartition("events", 0))["cleaner_checkpoint"] is None


def test_produce_and_fetch_go_to_the_partitions_log(parts: Parts) -> None:
    parts.queries.create_topic("events", 1)
    records = parts.queries.partition(TopicPartition("events", 0))

    info = records.append_batches(
        encode_batch([Record(0, START_MS, b"k", b"v"), Record(1, START_MS, None, b"w")])
    )

    assert (info.first_offset, info.last_offset) == (0, 1)
    assert [r.value for batch in records.read_batches(0) for r in batch.records()] == [b"v", b"w"]
    assert records.log_end_offset == 2
    assert parts.manager.get_log(TopicPartition("events", 0)).log_end_offset == 2


def test_a_missing_topic_or_partition_is_named(parts: Parts) -> None:
    parts.queries.create_topic("events", 2)

    with pytest.raises(NotFoundError, match="topic 'absent' does not exist"):
        parts.queries.partition_document(TopicPartition("absent", 0))
    with pytest.raises(NotFoundError, match=r"topic 'events' has no partition 5 \(it has 2\)"):
        parts.queries.partition(TopicPartition("events", 5))


def test_overrides_show_in_the_configs_and_reach_the_live_logs_on_refresh(parts: Parts) -> None:
    parts.queries.create_topic("events", 1)
    log = parts.manager.get_log(TopicPartition("events", 0))

    parts.queries.update_overrides("events", {"retention.ms": str(HOUR_MS), "segment.ms": "1000"})
    parts.queries.update_overrides("events", {}, deletes=["segment.ms"])

    assert parts.queries.overrides("events") == {"retention.ms": str(HOUR_MS)}
    entries = parts.queries.config_entries("events")
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (HOUR_MS, "override")
    assert entries["segment.bytes"].source != "override"
    assert log.config.retention_ms != HOUR_MS  # not applied until the refresh
    parts.queries.refresh_topic_configs()
    assert log.config.retention_ms == HOUR_MS
    assert parts.queries.set_aside_config_files == []


def test_deleting_a_topic_forgets_its_overrides(parts: Parts) -> None:
    parts.queries.create_topic("events", 2)
    parts.queries.update_overrides("events", {"retention.ms": str(HOUR_MS)})

    assert parts.queries.delete_topic("events") == [TopicPartition("events", 0), TopicPartition("events", 1)]

    assert parts.queries.topics() == {}
    assert parts.queries.overrides("events") == {}


def test_a_retention_dry_run_deletes_nothing_and_the_run_deletes_the_same(parts: Parts) -> None:
    parts.queries.create_topic("events", 1)
    parts.queries.update_overrides("events", {"retention.ms": str(HOUR_MS)})  # applied by the run's refresh
    tp = TopicPartition("events", 0)
    append(parts, tp, START_MS - DAY_MS, START_MS - DAY_MS, START_MS)

    dry = parts.queries.run_retention(dry_run=True)
    assert parts.manager.get_log(tp).log_start_offset == 0
    done = parts.queries.run_retention(dry_run=False)

    expected = [
        {"topic": "events", "partition": 0, "base_offset": offset, "reason": "time"} for offset in (0, 1)
    ]
    for doc, dry_run in ((dry, True), (done, False)):
        assert doc["dry_run"] is dry_run
        deleted = doc["deleted"]
        assert isinstance(deleted, list)
        assert [
            {k: d[k] for k in ("topic", "partition", "base_offset", "reason")} for d in deleted
        ] == expected
    assert parts.manager.get_log(tp).log_start_offset == 2


def test_explain_covers_the_matching_partitions(parts: Parts) -> None:
    parts.queries.create_topic("events", 2)
    parts.queries.create_topic("orders", 1)

    every = parts.queries.explain(topic=None, partition=None)["partitions"]
    one = parts.queries.explain(topic="events", partition=1)["partitions"]

    assert isinstance(every, list) and isinstance(one, list)
    assert sorted((d["topic"], d["partition"]) for d in every) == [
        ("events", 0),
        ("events", 1),
        ("orders", 0),
    ]
    assert [(d["topic"], d["partition"]) for d in one] == [("events", 1)]


def test_checkpoint_files_are_listed_per_log_dir_an_unreadable_one_with_its_error(parts: Parts) -> None:
    parts.queries.create_topic("events", 1)
    parts.manager.checkpoint_recovery_points()
    (parts.log_dir / CLEANER_OFFSET_CHECKPOINT).write_bytes(b"0\n1\nnot an entry\n")

    recovery, cleaner = parts.queries.checkpoints([RECOVERY_POINT_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT])

    assert recovery == {
        "log_dir": str(parts.log_dir),
        "name": RECOVERY_POINT_CHECKPOINT,
        "entries": [{"topic": "events", "partition": 0, "offset": 0}],
        "error": None,
    }
    assert cleaner["entries"] == []
    assert isinstance(cleaner["error"], str) and str(parts.log_dir) in cleaner["error"]


def test_the_log_dirs_state(parts: Parts) -> None:
    assert parts.queries.is_loaded
    assert parts.queries.log_dirs == [parts.log_dir]
    assert parts.queries.offline_dirs == {}
    assert parts.queries.failed_partitions == []
    assert parts.queries.stray_replicas == []
    assert parts.queries.now_ms() == START_MS

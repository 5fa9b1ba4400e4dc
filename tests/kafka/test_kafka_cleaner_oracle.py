"""Kafka's own cleaner is the oracle: the same closed segments, written by a real broker, are cleaned once by
the broker's LogCleaner and once by ``logcleaner clean`` (on a copy taken before the broker cleaned), and
each partition keeps the same batches and records: offsets, timestamps, keys, values, headers, tombstones,
transaction markers and producer fields."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from service.storage.topic_partition import TopicPartition
from tests.kafka.broker import KafkaBroker
from tests.kafka.checks import segment_base_offsets
from tests.kafka.clients import QUIET, TIMEOUT_S, Ending, ProducedRecord, commit_rounds, create_topic, produce
from tests.kafka.conftest import MakeBroker
from tests.kafka.round_trip import active_segment_base, wait_for_cleaner_checkpoint
from tests.kafka.run_logcleaner import log_dir_options, logcleaner_json
from tests.kafka.workloads import SEGMENT_MS, keyed_chunks

pytestmark = pytest.mark.kafka

ENDINGS: list[Ending] = ["commit", "abort", "commit", "abort", "abort", "commit", "commit"]
Batches = list[dict[str, Any]]
TOPICS = ("few-keys", "many-keys", "tombstones", "compressed", "idempotent", "transactions")


def shapes() -> dict[str, dict[str, Any]]:
    """Each topic's records and how they are produced; stamped now, as transaction markers are."""
    return {
        "few-keys": {"chunks": keyed_chunks(seed=21, keys=5)},
        "many-keys": {"chunks": keyed_chunks(seed=22, keys=400)},
        "tombstones": {"chunks": keyed_chunks(seed=23, keys=40, tombstone_share=0.35)},
        "compressed": {"chunks": keyed_chunks(seed=24, keys=30), "compression": "gzip"},
        "idempotent": {
            "chunks": keyed_chunks(seed=25, keys=30),
            "compression": "snappy",
            "config": {"enable.idempotence": "true"},
        },
        "transactions": {
            "chunks": keyed_chunks(seed=26, keys=30, chunks=len(ENDINGS)),
            "compression": "lz4",
            "transactional": ENDINGS,
        },
    }


ROLL_MS = 300
"""The broker's ``log.roll.ms``, which rolls the coordinators' partitions (their records carry the broker's
clock; the tests' topics roll by their own ``segment.ms``)."""
BROKER_CLEANS = {"log.cleaner.min.cleanable.ratio": "0.01", "log.cleaner.backoff.ms": "100"}


def partition_view(log_dir: Path, partitions: list[TopicPartition]) -> dict[TopicPartition, Batches]:
    """Each partition's batches as the comparison sees them: what the cleaner decides, without the delete
    horizon's exact time (each cleaner stamps its own clock) or the CRC that covers it."""
    views: dict[TopicPartition, Batches] = {tp: [] for tp in partitions}
    by_dir = {f"{tp.topic}-{tp.partition}": tp for tp in partitions}
    files = [str(p) for name in by_dir for p in sorted((log_dir / name).glob("*.log"))]
    for file in logcleaner_json("dump", "--records", *files)["files"]:
        tp = by_dir[Path(file["path"]).parent.name]
        for batch in file["batches"]:
            views[tp].append(
                {
                    "base_offset": batch["base_offset"],
                    "last_offset": batch["last_offset"],
                    "producer": (batch["producer_id"], batch["producer_epoch"], batch["base_sequence"]),
                    "is_transactional": batch["is_transactional"],
                    "is_control": batch["is_control"],
                    "compression": batch["compression"],
                    "has_delete_horizon": batch["delete_horizon_ms"] is not None,
                    "max_timestamp": batch["max_timestamp"],
                    "records": [
                        (r["offset"], r["timestamp"], r["key"], r["value"], r["headers"])
                        for r in batch["records"]
                    ],
                }
            )
    return views


def first_difference(kafka: list[dict[str, Any]], ours: list[dict[str, Any]]) -> str:
    for index, (theirs, mine) in enumerate(zip(kafka, ours, strict=False)):
        if theirs != mine:
            fields = {k: (theirs[k], mine[k]) for k in theirs if theirs[k] != mine[k] and k != "records"}
            records = [(a, b) for a, b in zip(theirs["records"], mine["records"], strict=False) if a != b][:2]
            return f"batch #{index} (kafka, ours): {fields} records {records}"
    return f"{len(kafka)} batches in Kafka's log, {len(ours)} in ours"


def clean_both_ways(broker: KafkaBroker, ends: dict[TopicPartition, int], copy: Path) -> str:
    """Copy the stopped broker's dir, let the broker's cleaner clean the original and logcleaner the copy,
    and say where each partition's batches first differ (empty when none does)."""
    shutil.copytree(broker.log_dir, copy)
    broker.update_properties(BROKER_CLEANS)
    broker.start()
    wait_for_cleaner_checkpoint(broker.log_dir, ends)
    broker.stop()

    cleaned = logcleaner_json("clean", *log_dir_options(copy))["cleaned"]
    ours_ends = {TopicPartition(e["topic"], e["partition"]): e["end_offset"] for e in cleaned}
    assert {tp: ours_ends.get(tp) for tp in ends} == ends, cleaned
    kafka = partition_view(broker.log_dir, list(ends))
    ours = partition_view(copy, list(ends))
    return "\n".join(f"{tp}: {first_difference(kafka[tp], ours[tp])}" for tp in ends if kafka[tp] != ours[tp])


def rolled_partitions(broker: KafkaBroker, topic: str) -> dict[TopicPartition, int]:
    """The topic's partitions with a closed segment, each with its active segment's base offset."""
    ends = {}
    for directory in sorted(broker.log_dir.glob(f"{topic}-*")):
        bases = segment_base_offsets(directory)
        if len(bases) > 1:
            ends[TopicPartition(topic, int(directory.name.rsplit("-", 1)[1]))] = bases[-1]
    return ends


def test_kafka_and_logcleaner_keep_the_same_records_of_the_same_segments(
    make_broker: MakeBroker, tmp_path: Path
) -> None:
    """The topic shapes, and the transaction coordinator's ``__transaction_state`` (rolled by the broker's
    ``log.roll.ms``; the transactional producer restarts half-way, bumping its epoch)."""
    broker = make_broker({"log.roll.ms": str(ROLL_MS)})
    for topic, shape in shapes().items():
        create_topic(
            broker.bootstrap_servers,
            topic,
            config={"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS)},
        )
        chunks: list[list[ProducedRecord]] = shape["chunks"]
        endings: list[Ending] | None = shape.get("transactional")
        halves = [(chunks, endings)]
        if endings is not None:
            half = len(chunks) // 2
            halves = [(chunks[:half], endings[:half]), (chunks[half:], endings[half:])]
        for index, (part, part_endings) in enumerate(halves):
            if index:
                time.sleep(ROLL_MS * 1.5 / 1000)
            produce(
                broker.bootstrap_servers,
                topic,
                part,
                compression=shape.get("compression", "none"),
                transactional=part_endings,
                config=shape.get("config"),
            )
    broker.stop()
    ends = {TopicPartition(topic, 0): active_segment_base(broker, topic) for topic in TOPICS}
    transaction_state = rolled_partitions(broker, "__transaction_state")
    assert transaction_state, "the transactions must roll a __transaction_state segment"
    differences = clean_both_ways(broker, ends | transaction_state, tmp_path / "copy")
    assert not differences, differences


def test_kafka_and_logcleaner_compact_consumer_offsets_alike(make_broker: MakeBroker, tmp_path: Path) -> None:
    """A group coordinator's records (offset commits, a deleted group's tombstones) in ``__consumer_offsets``,
    rolled by the broker's ``log.roll.ms``."""
    broker = make_broker({"log.roll.ms": str(ROLL_MS)})
    create_topic(broker.bootstrap_servers, "orders", partitions=3)
    commit_rounds(broker.bootstrap_servers, "kept-group", "orders", 3, 6, ROLL_MS * 6 // 5)
    commit_rounds(broker.bootstrap_servers, "deleted-group", "orders", 3, 2, ROLL_MS * 6 // 5)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, **QUIET})
    for future in admin.delete_consumer_groups(["deleted-group"], request_timeout=TIMEOUT_S).values():
        future.result()
    commit_rounds(broker.bootstrap_servers, "kept-group", "orders", 3, 2, ROLL_MS * 6 // 5)
    broker.stop()
    ends = rolled_partitions(broker, "__consumer_offsets")
    assert ends, "the commits must roll __consumer_offsets segments"
    differences = clean_both_ways(broker, ends, tmp_path / "copy")
    assert not differences, differences

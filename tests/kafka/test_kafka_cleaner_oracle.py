"""Kafka's own cleaner is the oracle: the same closed segments, written by a real broker, are cleaned once by
the broker's LogCleaner and once by ``logcleaner clean`` (on a copy taken before the broker cleaned), and
each partition keeps the same batches and records: offsets, timestamps, keys, values, headers, tombstones,
transaction markers and producer fields."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.kafka.clients import Ending, ProducedRecord, create_topic, produce
from tests.kafka.conftest import MakeBroker
from tests.kafka.round_trip import active_segment_base, wait_for_cleaner_checkpoint
from tests.kafka.run_logcleaner import log_dir_options, logcleaner_json
from tests.kafka.workloads import SEGMENT_MS, keyed_chunks

pytestmark = pytest.mark.kafka

ENDINGS: list[Ending] = ["commit", "abort", "commit", "abort", "abort", "commit", "commit"]
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


BROKER_CLEANS = {"log.cleaner.min.cleanable.ratio": "0.01", "log.cleaner.backoff.ms": "100"}


def partition_view(log_dir: Path, topics: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each topic's batches as the comparison sees them: what the cleaner decides, without the delete
    horizon's exact time (each cleaner stamps its own clock) or the CRC that covers it."""
    files = [str(p) for topic in topics for p in sorted((log_dir / f"{topic}-0").glob("*.log"))]
    dumped = logcleaner_json("dump", "--records", *files)["files"]
    views: dict[str, list[dict[str, Any]]] = {topic: [] for topic in topics}
    for file in dumped:
        topic = Path(file["path"]).parent.name.rsplit("-", 1)[0]
        for batch in file["batches"]:
            views[topic].append(
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


def test_kafka_and_logcleaner_keep_the_same_records_of_the_same_segments(
    make_broker: MakeBroker, tmp_path: Path
) -> None:
    broker = make_broker()
    for topic, shape in shapes().items():
        create_topic(
            broker.bootstrap_servers,
            topic,
            config={"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS)},
        )
        chunks: list[list[ProducedRecord]] = shape["chunks"]
        produce(
            broker.bootstrap_servers,
            topic,
            chunks,
            compression=shape.get("compression", "none"),
            transactional=shape.get("transactional"),
            config=shape.get("config"),
        )
    broker.stop()
    ends = {topic: active_segment_base(broker, topic) for topic in TOPICS}
    copy = tmp_path / "copy"
    shutil.copytree(broker.log_dir, copy)

    broker.update_properties(BROKER_CLEANS)
    broker.start()
    wait_for_cleaner_checkpoint(broker.log_dir, ends)
    broker.stop()

    cleaned = logcleaner_json("clean", *log_dir_options(copy))["cleaned"]
    assert {e["topic"]: e["end_offset"] for e in cleaned if e["topic"] in TOPICS} == ends, cleaned
    kafka = partition_view(broker.log_dir, list(TOPICS))
    ours = partition_view(copy, list(TOPICS))
    differences = {
        topic: first_difference(kafka[topic], ours[topic]) for topic in TOPICS if kafka[topic] != ours[topic]
    }
    assert not differences, "\n".join(f"{topic}: {text}" for topic, text in differences.items())

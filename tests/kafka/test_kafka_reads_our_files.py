"""Kafka's own DumpLogSegments reads every segment, index, time index, transaction index and producer
snapshot that logcleaner wrote (``gen`` in several shapes, then ``clean`` and ``retention``): no invalid
batch, no index that fails Kafka's sanity check or points at the wrong batch, no trailing bytes; and
``logcleaner dump --json`` says what Kafka says about every batch, record and entry."""

from __future__ import annotations

import base64
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.kafka.distribution import KafkaDistribution
from tests.kafka.dump_log_segments import KafkaDump, dump_log_segments
from tests.kafka.run_logcleaner import log_dir_options, logcleaner, logcleaner_json

pytestmark = pytest.mark.kafka

DAY_MS = 86_400_000
COMMON = ("--records", "1200", "--batch-size", "25", "--value-size", "60", "--segment-bytes", "16384")
KEYED = ("--keys", "80", "--tombstones", "0.1", "--timestamp-spread", "600000")
SHAPES: dict[str, tuple[str, ...]] = {
    "plain": KEYED,
    "gzip": (*KEYED, "--compression", "gzip"),
    "snappy": (*KEYED, "--compression", "snappy"),
    "lz4": (*KEYED, "--compression", "lz4"),
    "zstd": (*KEYED, "--compression", "zstd"),
    "idempotent": (*KEYED, "--idempotent", "--compression", "lz4"),
    "transactions": (*KEYED, "--transaction-batches", "3", "--aborted-transactions", "0.3"),
}
AGED = "aged"
"""Nine days of timestamps ending a day ago, under a three-day retention.ms."""
SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
INDEX_SUFFIXES = (".index", ".timeindex")
BATCH_KEYS = (
    "position",
    "base_offset",
    "last_offset",
    "records_count",
    "base_sequence",
    "last_sequence",
    "producer_id",
    "producer_epoch",
    "partition_leader_epoch",
    "is_transactional",
    "is_control",
    "delete_horizon_ms",
    "timestamp_type",
    "max_timestamp",
    "size_bytes",
    "magic",
    "compression",
    "crc",
    "crc_valid",
)
ENTRY_KEYS = {
    ".index": ("offset", "position"),
    ".timeindex": ("timestamp", "offset"),
    ".txnindex": ("version", "producer_id", "first_offset", "last_offset", "last_stable_offset"),
    ".snapshot": (
        "producer_id",
        "producer_epoch",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_sequence",
        "last_offset",
        "offset_delta",
        "timestamp",
    ),
}


@dataclass(frozen=True)
class Written:
    files: list[Path]
    kafka_checked: KafkaDump
    kafka_verified: KafkaDump
    kafka_dumped: KafkaDump


@pytest.fixture(scope="module")
def written(kafka_distribution: KafkaDistribution, tmp_path_factory: pytest.TempPathFactory) -> Written:
    """Files ``gen`` wrote (a copy kept as they were), and the same logs after ``clean`` and ``retention``,
    each run through Kafka's tool three ways: deep iteration with the indexes' sanity checks, index
    verification only, and a full dump."""
    base = tmp_path_factory.mktemp("written")
    logs = base / "logs"
    logs.mkdir()
    for topic, shape in SHAPES.items():
        logcleaner("gen", "--log-dir", str(logs), "--topic", topic, *COMMON, *shape)
    now = int(time.time() * 1000)
    aged = ("--timestamp-start", str(now - 10 * DAY_MS), "--timestamp-spread", str(9 * DAY_MS))
    logcleaner("gen", "--log-dir", str(logs), "--topic", AGED, *COMMON, *aged)
    shutil.copytree(logs, base / "generated")
    for topic in SHAPES:
        logcleaner(
            "topic-config", "--topic", topic, "--set", "cleanup.policy=compact", *log_dir_options(logs)
        )
    logcleaner("topic-config", "--topic", AGED, "--set", f"retention.ms={3 * DAY_MS}", *log_dir_options(logs))
    cleaned = logcleaner_json("clean", *log_dir_options(logs))["cleaned"]
    assert {entry["topic"] for entry in cleaned} == set(SHAPES), cleaned
    deleted = logcleaner_json("retention", *log_dir_options(logs))["deleted"]
    assert {entry["topic"] for entry in deleted} == {AGED}, deleted

    files = sorted(p for p in base.rglob("*") if p.suffix in SUFFIXES)
    work = base / "tools"
    work.mkdir()

    def dump(*options: str) -> KafkaDump:
        return dump_log_segments(kafka_distribution, files, *options, work_dir=work)

    return Written(
        files=files,
        kafka_checked=dump("--deep-iteration", "--index-sanity-check"),
        kafka_verified=dump("--verify-index-only"),
        kafka_dumped=dump("--deep-iteration"),
    )


def test_dump_log_segments_finds_nothing_wrong_in_any_file(written: Written) -> None:
    for dump in (written.kafka_checked, written.kafka_verified, written.kafka_dumped):
        assert not dump.problems, "\n".join(dump.problems[:20])
    checked = written.kafka_checked.files
    assert set(checked) == set(written.files)
    unchecked = [
        p for p in written.files if p.suffix in INDEX_SUFFIXES and not checked[p].passed_sanity_check
    ]
    empty_indexes = [p for p in unchecked if p.stat().st_size == 0]
    assert unchecked == empty_indexes, unchecked
    batches = [b for f in checked.values() for b in f.batches]
    assert batches and all(b["isvalid"] == "true" for b in batches)
    kinds = {p.suffix for p in written.files}
    assert kinds == set(SUFFIXES), kinds


def test_logcleaner_dump_says_what_kafka_says(written: Written) -> None:
    ours = {
        Path(f["path"]): f for f in logcleaner_json("dump", "--records", *map(str, written.files))["files"]
    }
    disagreements = []
    for path in written.files:
        kafka = written.kafka_dumped.files[path]
        mine = ours[path]
        if path.suffix == ".log":
            pairs = [
                ("batches", [kafka_batch(b) for b in kafka.batches], [our_batch(b) for b in mine["batches"]]),
                ("records", [kafka_record(r) for r in kafka.records], list(our_records(mine["batches"]))),
            ]
        else:
            pairs = [
                (
                    "entries",
                    [kafka_entry(path.suffix, e) for e in kafka.entries],
                    [our_entry(path.suffix, e) for e in mine["entries"]],
                )
            ]
        for what, theirs, ours_ in pairs:
            if theirs != ours_:
                first = next(
                    (i for i, (a, b) in enumerate(zip(theirs, ours_, strict=False)) if a != b),
                    min(len(theirs), len(ours_)),
                )
                disagreements.append(
                    f"{path} {what} #{first} of {len(theirs)}/{len(ours_)}: "
                    f"kafka {theirs[first : first + 1]} ours {ours_[first : first + 1]}"
                )
    assert not disagreements, "\n".join(disagreements[:10])


def optional_long(text: str) -> int | None:
    """Kafka prints an OptionalLong as ``OptionalLong.empty`` or ``OptionalLong[5]``."""
    return None if text == "OptionalLong.empty" else int(text.removeprefix("OptionalLong[").removesuffix("]"))


def kafka_batch(fields: dict[str, str]) -> dict[str, Any]:
    timestamp_type = "LogAppendTime" if "LogAppendTime" in fields else "CreateTime"
    return {
        "position": int(fields["position"]),
        "base_offset": int(fields["baseOffset"]),
        "last_offset": int(fields["lastOffset"]),
        "records_count": int(fields["count"]),
        "base_sequence": int(fields["baseSequence"]),
        "last_sequence": int(fields["lastSequence"]),
        "producer_id": int(fields["producerId"]),
        "producer_epoch": int(fields["producerEpoch"]),
        "partition_leader_epoch": int(fields["partitionLeaderEpoch"]),
        "is_transactional": fields["isTransactional"] == "true",
        "is_control": fields["isControl"] == "true",
        "delete_horizon_ms": optional_long(fields["deleteHorizonMs"]),
        "timestamp_type": timestamp_type,
        "max_timestamp": int(fields[timestamp_type]),
        "size_bytes": int(fields["size"]),
        "magic": int(fields["magic"]),
        "compression": fields["compresscodec"],
        "crc": int(fields["crc"]),
        "crc_valid": fields["isvalid"] == "true",
    }


def our_batch(batch: dict[str, Any]) -> dict[str, Any]:
    return {key: batch[key] for key in BATCH_KEYS}


def kafka_record(fields: dict[str, str]) -> dict[str, Any]:
    header_keys = fields["headerKeys"].strip("[]")
    return {
        "offset": int(fields["offset"]),
        "timestamp": int(fields.get("CreateTime", fields.get("LogAppendTime", "-1"))),
        "key_size": int(fields["keySize"]),
        "value_size": int(fields["valueSize"]),
        "sequence": int(fields["sequence"]),
        "header_keys": header_keys.split(",") if header_keys else [],
    }


def our_records(batches: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for batch in batches:
        for record in batch["records"]:
            sequence = batch["base_sequence"]
            yield {
                "offset": record["offset"],
                "timestamp": record["timestamp"],
                "key_size": size_of(record["key"]),
                "value_size": size_of(record["value"]),
                "sequence": -1 if sequence < 0 else sequence + record["offset"] - batch["base_offset"],
                "header_keys": [h["key"] for h in record["headers"]],
            }


def size_of(data: dict[str, str] | None) -> int:
    return -1 if data is None else len(base64.b64decode(data["data"]))


def kafka_entry(suffix: str, fields: dict[str, str]) -> dict[str, Any]:
    """An entry line in our dump's names; a snapshot's empty ``currentTxnFirstOffset`` is the -1 the file
    holds, which logcleaner's dump prints as it is."""
    if suffix == ".index":
        return {"offset": int(fields["offset"]), "position": int(fields["position"])}
    if suffix == ".timeindex":
        return {"timestamp": int(fields["timestamp"]), "offset": int(fields["offset"])}
    if suffix == ".txnindex":
        return {
            "version": int(fields["version"]),
            "producer_id": int(fields["producerId"]),
            "first_offset": int(fields["firstOffset"]),
            "last_offset": int(fields["lastOffset"]),
            "last_stable_offset": int(fields["lastStableOffset"]),
        }
    first_offset = optional_long(fields["currentTxnFirstOffset"])
    return {
        "producer_id": int(fields["producerId"]),
        "producer_epoch": int(fields["producerEpoch"]),
        "coordinator_epoch": int(fields["coordinatorEpoch"]),
        "current_txn_first_offset": -1 if first_offset is None else first_offset,
        "last_sequence": int(fields["lastSequence"]),
        "last_offset": int(fields["lastOffset"]),
        "offset_delta": int(fields["offsetDelta"]),
        "timestamp": int(fields["timestamp"]),
    }


def our_entry(suffix: str, entry: dict[str, Any]) -> dict[str, Any]:
    return {key: entry[key] for key in ENTRY_KEYS[suffix]}

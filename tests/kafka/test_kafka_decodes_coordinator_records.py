"""Kafka's DumpLogSegments decodes the coordinator records logcleaner writes (``gen --workload
consumer-offsets`` and ``transaction-state``, then ``clean``) with its ``--offsets-decoder`` and
``--transaction-log-decoder``, and ``logcleaner dump``'s decoders give the same fields and values."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.kafka.distribution import KafkaDistribution
from tests.kafka.dump_log_segments import dump_log_segments
from tests.kafka.run_logcleaner import log_dir_options, logcleaner, logcleaner_json

pytestmark = pytest.mark.kafka

DECODERS = {"__consumer_offsets": "--offsets-decoder", "__transaction_state": "--transaction-log-decoder"}
DECODED = re.compile(r" key: (\{.*?\})(?: payload: (.*))?$")
TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)
"""Kafka's ``TransactionState`` names by id: its decoder prints the name, logcleaner's the id."""
MEMBER_BLOBS = ("subscription", "assignment")
"""Kafka decodes a member's subscription and assignment; logcleaner's dump gives their bytes."""


@pytest.fixture(scope="module")
def coordinator_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    logs = tmp_path_factory.mktemp("coordinators")
    common = ("--log-dir", str(logs), "--partitions", "2", "--segment-bytes", "4096")
    logcleaner("gen", *common, "--workload", "consumer-offsets", "--groups", "6", "--expired-groups", "0.5")
    logcleaner(
        "gen",
        *common,
        "--workload",
        "transaction-state",
        "--transactional-ids",
        "6",
        "--aborted-transactions",
        "0.3",
        "--expired-ids",
        "0.5",
    )
    cleaned = logcleaner_json("clean", *log_dir_options(logs))["cleaned"]
    assert {entry["topic"] for entry in cleaned} == set(DECODERS), cleaned
    return {topic: sorted(logs.glob(f"{topic}-*/*.log")) for topic in DECODERS}


@pytest.mark.parametrize("topic", sorted(DECODERS))
def test_kafka_decodes_our_coordinator_records_as_logcleaner_does(
    topic: str,
    coordinator_logs: dict[str, list[Path]],
    kafka_distribution: KafkaDistribution,
    tmp_path: Path,
) -> None:
    files = coordinator_logs[topic]
    decoder = DECODERS[topic]
    kafka = dump_log_segments(kafka_distribution, files, "--deep-iteration", decoder, work_dir=tmp_path)
    assert not kafka.problems, "\n".join(kafka.problems[:10])
    ours = logcleaner_json("dump", "--records", decoder, *map(str, files))["files"]
    compared = 0
    for file in ours:
        path = Path(file["path"])
        lines = kafka.files[path].record_lines
        records = [r for batch in file["batches"] if not batch["is_control"] for r in batch["records"]]
        assert len(lines) == len(records), path
        for line, record in zip(lines, records, strict=True):
            theirs = kafka_decoded(line)
            if theirs is None:
                assert kafka_distribution.major < 4, f"Kafka's decoder printed no JSON: {line}"
                continue
            assert theirs == our_decoded(record["decoded"]), f"{path} offset {record['offset']}"
            compared += 1
    if kafka_distribution.major >= 4 or topic == "__consumer_offsets":
        assert compared == sum(len(kafka.files[Path(f["path"])].record_lines) for f in ours) > 0


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def snake_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {snake(k): snake_keys(v) for k, v in value.items() if k not in MEMBER_BLOBS}
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    return value


def kafka_decoded(line: str) -> dict[str, Any] | None:
    """Kafka's ``key: {"type", "data"} payload: {"version", "data"}`` in logcleaner's shape, or None when
    the decoder prints text rather than JSON (Kafka 3.9's transaction log decoder)."""
    found = DECODED.search(line)
    if found is None:
        return None
    key_text, payload_text = found.groups()
    try:
        key = json.loads(key_text)
        payload = json.loads(payload_text) if payload_text not in (None, "<DELETE>") else None
    except json.JSONDecodeError:
        return None
    value = None if payload is None else {"version": int(payload["version"]), **snake_keys(payload["data"])}
    return {"key": {"version": int(key["type"]), **snake_keys(key["data"])}, "value": value}


def our_decoded(decoded: dict[str, Any]) -> dict[str, Any]:
    key = {k: v for k, v in decoded["key"].items() if k != "type"}
    value = decoded["value"]
    if value is not None:
        value = snake_keys(value)
        if isinstance(value.get("transaction_status"), int):
            value["transaction_status"] = TRANSACTION_STATES[value["transaction_status"]]
    return {"key": key, "value": value}

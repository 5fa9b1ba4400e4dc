"""Kafka's ``DumpLogSegments --cluster-metadata-decoder`` and ``logcleaner dump --cluster-metadata-decoder``
agree on every metadata record: a real broker's ``__cluster_metadata`` after topics, configs, a
transactional producer and a deletion, and a log logcleaner writes with one record of every kind at every
version Kafka 4.4 defines. Each record's kind (``CLEAR_ELR_RECORD`` is ``ClearElrRecord``) and field
values (camelCase names in snake_case) must match."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

# The typed homes of the classes confluent_kafka.admin re-exports (as clients.py imports NewTopic).
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.admin._resource import ResourceType

from service.metadata.log_writer import MetadataRecordSpec, encode_metadata_batch
from service.metadata.schemas import METADATA_SCHEMAS
from tests.kafka.clients import QUIET, TIMEOUT_S, create_topic, produce
from tests.kafka.conftest import MakeBroker
from tests.kafka.distribution import KafkaDistribution
from tests.kafka.dump_log_segments import dump_log_segments
from tests.kafka.run_logcleaner import logcleaner_json
from tests.kafka.workloads import keyed_chunks
from tests.service.metadata.metadata_helpers import sample_fields

pytestmark = pytest.mark.kafka

PAYLOAD = re.compile(r" payload: (\{.*\})$")
WRITTEN_AT_MS = 1_700_000_000_000


def kafka_type(kind: str) -> str:
    """Our kind as Kafka's ``MetadataRecordType`` names it: ``ClearElrRecord`` → ``CLEAR_ELR_RECORD``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).upper()


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def kafka_fields(value: Any) -> Any:
    """Kafka's JSON of a message in logcleaner's shape: snake_case names; bytes (base64 text in Kafka's
    JSON) as logcleaner's dump gives them."""
    if isinstance(value, dict):
        return {snake(k): kafka_fields(v) for k, v in value.items()}
    if isinstance(value, list):
        return [kafka_fields(v) for v in value]
    return value


def our_fields(value: Any) -> Any:
    if isinstance(value, dict) and value.get("type") == "BINARY":
        return value["data"]
    if isinstance(value, dict):
        return {k: our_fields(v) for k, v in value.items()}
    if isinstance(value, list):
        return [our_fields(v) for v in value]
    return value


def kafka_records(distribution: KafkaDistribution, files: list[Path], work_dir: Path) -> dict[Any, Any]:
    """Kafka's decoded metadata records by (file, offset): ``{"type", "version", "data"}``."""
    kafka = dump_log_segments(distribution, files, "--cluster-metadata-decoder", work_dir=work_dir)
    assert not kafka.problems, "\n".join(kafka.problems[:10])
    out: dict[Any, Any] = {}
    for path, dumped in kafka.files.items():
        for fields, line in zip(dumped.records, dumped.record_lines, strict=True):
            found = PAYLOAD.search(line)
            if found is not None and '"type"' in found.group(1):
                out[path.resolve(), int(fields["offset"])] = json.loads(found.group(1))
    return out


def our_records(files: list[Path]) -> dict[Any, Any]:
    """logcleaner's decoded data records by (file, offset)."""
    document = logcleaner_json("dump", "--cluster-metadata-decoder", *map(str, files))
    return {
        (Path(file["path"]).resolve(), record["offset"]): record["decoded"]["value"]
        for file in document["files"]
        for batch in file["batches"]
        if not batch["is_control"]
        for record in batch["records"]
    }


def assert_dumps_agree(distribution: KafkaDistribution, files: list[Path], work_dir: Path) -> list[str]:
    """Both dumps of ``files`` give the same records, kind and fields; the kinds, in log order."""
    theirs = kafka_records(distribution, files, work_dir)
    ours = our_records(files)
    assert sorted(theirs) == sorted(ours)
    kinds = []
    for place, value in ours.items():
        kafka = theirs[place]
        fields = our_fields({k: v for k, v in value.items() if k not in ("kind", "api_key", "version")})
        assert (kafka_type(value["kind"]), value["version"]) == (kafka["type"], kafka["version"]), place
        expected = kafka_fields(kafka["data"])
        left_out = {k: v for k, v in fields.items() if k not in expected}  # Kafka omits a tagged default
        assert {k: fields[k] for k in expected if k in fields} == expected, place
        assert all(_is_tagged_default(value["api_key"], k, v) for k, v in left_out.items()), (place, left_out)
        kinds.append(value["kind"])
    return kinds


def _is_tagged_default(api_key: int, name: str, value: object) -> bool:
    field = next(f for f in METADATA_SCHEMAS[api_key].fields if f.name == name)
    return field.tag is not None and value == field.default


def test_every_kind_at_every_version_dumps_as_kafka_dumps_it(
    kafka_distribution: KafkaDistribution, tmp_path: Path
) -> None:
    specs = [
        MetadataRecordSpec(key, version, sample_fields(schema, version))
        for key, schema in sorted(METADATA_SCHEMAS.items())
        for version in range(schema.first_version, schema.last_version + 1)
    ]
    directory = tmp_path / "__cluster_metadata-0"
    directory.mkdir()
    segment = directory / "00000000000000000000.log"
    segment.write_bytes(encode_metadata_batch(specs, base_offset=0, timestamp=WRITTEN_AT_MS))
    kinds = assert_dumps_agree(kafka_distribution, [segment], tmp_path)
    assert kinds == [METADATA_SCHEMAS[spec.api_key].name for spec in specs]


def _alter_configs(bootstrap_servers: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **QUIET})
    topic = ConfigResource(
        ResourceType.TOPIC,
        "orders",
        incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    broker = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("log.retention.bytes", "123456", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([topic, broker]).values():
        future.result(timeout=TIMEOUT_S)
    for future in admin.delete_topics(["gone"]).values():
        future.result(timeout=TIMEOUT_S)


def test_a_real_brokers_metadata_log_dumps_as_kafka_dumps_it(
    make_broker: MakeBroker, kafka_distribution: KafkaDistribution, tmp_path: Path
) -> None:
    broker = make_broker()
    servers = broker.bootstrap_servers
    create_topic(
        servers, "orders", partitions=2, config={"cleanup.policy": "compact", "segment.bytes": "1048576"}
    )
    create_topic(servers, "gone", config={"min.insync.replicas": "1"})
    produce(servers, "orders", keyed_chunks(seed=3, chunks=2), transactional=["commit", "abort"])
    _alter_configs(servers)
    broker.stop()

    copy = tmp_path / "copy"
    shutil.copytree(broker.log_dir / "__cluster_metadata-0", copy)
    files = sorted(copy.glob("*.log")) + sorted(copy.glob("*.checkpoint"))
    kinds = set(assert_dumps_agree(kafka_distribution, files, tmp_path))
    expected = {
        "ClearElrRecord",  # the transaction coordinator creates __transaction_state with min.insync.replicas
        "FeatureLevelRecord",
        "RegisterControllerRecord",
        "RegisterBrokerRecord",
        "TopicRecord",
        "PartitionRecord",
        "ConfigRecord",
        "ProducerIdsRecord",
        "RemoveTopicRecord",
    }
    assert expected <= kinds, kinds

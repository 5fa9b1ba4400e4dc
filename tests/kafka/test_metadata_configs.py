"""Topic configs a real broker keeps in its metadata log reach logcleaner: topics created with configs, one
altered, one deleted, a dynamic broker config; on a copy of the stopped broker's dir, logcleaner's
effective configs and ``explain`` give Kafka's values with their source."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

# The typed homes of the classes confluent_kafka.admin re-exports (as clients.py imports NewTopic).
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.admin._resource import ResourceType

from service.config.broker_config import BrokerConfig
from service.metadata.source import MetadataSource
from service.storage.partition_metadata import read_partition_metadata
from tests.kafka.clients import QUIET, TIMEOUT_S, create_topic, produce
from tests.kafka.conftest import MakeBroker
from tests.kafka.run_logcleaner import log_dir_options, logcleaner_json
from tests.kafka.workloads import keyed_chunks

pytestmark = pytest.mark.kafka


def _alter(bootstrap_servers: str, resource: ConfigResource) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **QUIET})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT_S)


def _set(name: str, value: str) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def test_the_brokers_topic_configs_govern_logcleaner(make_broker: MakeBroker, tmp_path: Path) -> None:
    broker = make_broker()
    servers = broker.bootstrap_servers
    create_topic(servers, "orders", config={"cleanup.policy": "compact", "segment.bytes": "1048576"})
    create_topic(servers, "audit", config={"retention.ms": "3600000"})
    create_topic(servers, "gone", config={"cleanup.policy": "compact"})
    for topic in ("orders", "audit", "gone"):
        produce(servers, topic, keyed_chunks(seed=5, chunks=1))
    _alter(
        servers,
        ConfigResource(ResourceType.TOPIC, "audit", incremental_configs=[_set("retention.ms", "1000")]),
    )
    _alter(
        servers,
        ConfigResource(ResourceType.BROKER, "1", incremental_configs=[_set("log.retention.bytes", "123456")]),
    )
    admin = AdminClient({"bootstrap.servers": servers, **QUIET})
    for future in admin.delete_topics(["gone"]).values():
        future.result(timeout=TIMEOUT_S)
    broker.stop()

    copy = tmp_path / "copy"
    shutil.copytree(broker.log_dir, copy)
    config, _ = BrokerConfig.from_properties({"log.dirs": str(copy)})
    source = MetadataSource(config)
    source.load()
    image = source.image
    assert image is not None and source.node_id == 1
    assert {"orders", "audit"} <= set(image.topics) and "gone" in image.removed_topics
    on_disk = read_partition_metadata(copy / "orders-0")
    assert on_disk is not None and image.topics["orders"].topic_id == on_disk.topic_id
    assert image.topics["orders"].partitions == {0: (1,)}

    documents = logcleaner_json("explain", *log_dir_options(copy))["partitions"]
    by_topic = {doc["topic"]: doc for doc in documents}
    assert "gone" not in by_topic
    assert not [doc for doc in documents if doc["stray"]], "every replica is the broker's own"
    orders, audit = by_topic["orders"], by_topic["audit"]
    assert orders["cleanup_policy"] == "compact" and orders["config_sources"]["cleanup.policy"] == "metadata"
    assert audit["retention_ms"] == 1000 and audit["config_sources"]["retention.ms"] == "metadata"
    assert (
        audit["retention_bytes"] == 123456 and audit["config_sources"]["retention.bytes"] == "broker-dynamic"
    )

    configs = logcleaner_json("topic-config", "--topic", "orders", *log_dir_options(copy))["configs"]
    segment_bytes = next(c for c in configs if c["name"] == "segment.bytes")
    assert segment_bytes == {"name": "segment.bytes", "value": 1048576, "source": "metadata"}

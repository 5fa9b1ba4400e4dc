"""A topic's effective config over every layer: override, metadata, internal topic defaults, dynamic broker
configs (this node's, then the cluster default), the broker file, Kafka's defaults; each with its source."""

from __future__ import annotations

import logging

import pytest

from service.config.broker_config import BrokerConfig
from service.config.config_layers import DynamicConfigs
from service.config.topic_config import describe_topic_config, effective_log_config


def _broker(props: dict[str, str]) -> BrokerConfig:
    config, warnings = BrokerConfig.from_properties(props)
    assert warnings == []
    return config


def _dynamic(
    topics: dict[str, dict[str, str]] | None = None,
    node: dict[str, str] | None = None,
    cluster: dict[str, str] | None = None,
) -> DynamicConfigs:
    return DynamicConfigs.checked(topics or {}, node or {}, cluster or {})


def test_each_layer_wins_over_the_ones_below_it() -> None:
    broker = _broker(
        {"log.retention.bytes": "1", "log.segment.bytes": "1000", "log.cleaner.delete.retention.ms": "5"}
    )
    dynamic = _dynamic(
        topics={"orders": {"retention.bytes": "2", "segment.bytes": "2000"}},
        node={"log.retention.bytes": "3", "log.cleaner.delete.retention.ms": "6"},
        cluster={
            "log.retention.bytes": "4",
            "log.cleaner.delete.retention.ms": "7",
            "log.index.interval.bytes": "99",
        },
    )
    entries = describe_topic_config(broker, {"retention.bytes": "0"}, topic="orders", dynamic=dynamic)
    shown = {name: (entry.value, entry.source) for name, entry in entries.items()}
    assert shown["retention.bytes"] == (0, "override")
    assert shown["segment.bytes"] == (2000, "metadata")
    assert shown["delete.retention.ms"] == (6, "broker-dynamic"), "this node's before the cluster default"
    assert shown["index.interval.bytes"] == (99, "broker-dynamic")
    assert shown["max.message.bytes"] == (1_048_588, "default")
    config = effective_log_config(broker, {"retention.bytes": "0"}, topic="orders", dynamic=dynamic)
    assert (config.retention_bytes, config.segment_bytes, config.delete_retention_ms) == (0, 2000, 6)
    assert dict(config.config_sources)["segment.bytes"] == "metadata"
    # Another topic sees the metadata of none but its own.
    other = describe_topic_config(broker, {}, topic="audit", dynamic=dynamic)
    assert (other["segment.bytes"].value, other["segment.bytes"].source) == (1000, "broker")


def test_synonyms_resolve_over_the_dynamic_and_static_layers_as_kafka_merges_them() -> None:
    # Static log.retention.ms beats a dynamic log.retention.hours: ms is first in the synonym chain.
    static_ms = _broker({"log.retention.ms": "1000"})
    entry = describe_topic_config(
        static_ms, {}, topic="t", dynamic=_dynamic(cluster={"log.retention.hours": "2"})
    )
    assert (entry["retention.ms"].value, entry["retention.ms"].source) == (1000, "broker")
    # A dynamic log.retention.minutes beats a static log.retention.hours, in ms.
    static_hours = _broker({"log.retention.hours": "5"})
    entry = describe_topic_config(
        static_hours, {}, topic="t", dynamic=_dynamic(node={"log.retention.minutes": "3"})
    )
    assert (entry["retention.ms"].value, entry["retention.ms"].source) == (180_000, "broker-dynamic")
    negative = describe_topic_config(
        static_hours, {}, topic="t", dynamic=_dynamic(node={"log.retention.ms": "-5"})
    )
    assert negative["retention.ms"].value == -1, "any negative retention is unlimited"


@pytest.mark.parametrize("internal", ["__consumer_offsets", "__transaction_state"])
def test_internal_topics_take_kafkas_creation_defaults(internal: str) -> None:
    broker = _broker({"log.cleanup.policy": "delete", "log.segment.bytes": "5000"})
    entries = describe_topic_config(broker, {}, topic=internal)
    policy, segment_bytes = entries["cleanup.policy"], entries["segment.bytes"]
    assert (policy.value, policy.source) == ("compact", "internal-topic-default")
    assert (segment_bytes.value, segment_bytes.source) == (104_857_600, "internal-topic-default")
    assert effective_log_config(broker, {}, topic=internal).is_compacted
    sized = _broker({"offsets.topic.segment.bytes": "2048", "transaction.state.log.segment.bytes": "4096"})
    assert effective_log_config(sized, {}, topic=internal).segment_bytes == (
        2048 if internal == "__consumer_offsets" else 4096
    )
    # Whatever the metadata or an override says wins.
    dynamic = _dynamic(topics={internal: {"cleanup.policy": "compact,delete"}})
    assert (
        describe_topic_config(broker, {}, topic=internal, dynamic=dynamic)["cleanup.policy"].source
        == "metadata"
    )
    overridden = describe_topic_config(broker, {"segment.bytes": "1024"}, topic=internal)
    assert (overridden["segment.bytes"].value, overridden["segment.bytes"].source) == (1024, "override")


def test_a_metadata_value_logcleaner_rejects_is_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        dynamic = _dynamic(
            topics={
                "orders": {"retention.ms": "-7", "cleanup.policy": "compact", "min.insync.replicas": "2"}
            },
            node={"log.retention.ms": "soon"},
        )
    assert dynamic.for_topic("orders") == {"cleanup.policy": "compact"}, "unknown keys are left out quietly"
    assert dynamic.node == {}
    assert "retention.ms='-7' of topic orders ignored" in caplog.text
    assert "log.retention.ms='soon' of this broker ignored" in caplog.text
    assert "min.insync.replicas" not in caplog.text

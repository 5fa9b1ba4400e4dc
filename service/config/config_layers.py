"""The config layers a topic's effective config is resolved from, besides the broker file and the defaults.

Highest first, as a KRaft broker resolves a topic's ``LogConfig``:

1. ``override``: logcleaner's own topic overrides (``logcleaner topic-config``, the REST API);
2. ``metadata``: the topic's configs in the broker's metadata log (``kafka-configs.sh --alter``,
   ``kafka-topics.sh --create --config``, AdminClient ``alterConfigs``);
3. Kafka's creation defaults of its internal topics (``__consumer_offsets``, ``__transaction_state``), shown
   as ``default``: Kafka creates them compacted, so they are compacted whenever nothing above says
   otherwise, even when the broker's ``log.cleanup.policy`` is ``delete``;
4. ``broker-dynamic``: dynamic broker configs in the metadata log, this node's before the cluster default
   (``kafka-configs.sh --entity-type brokers [--entity-name N | --entity-default]``);
5. ``broker``: the broker config file and ``--override``;
6. ``default``: Kafka's defaults.

Within layers 4-6 a broker key and its synonyms (``log.retention.ms`` → ``.minutes`` → ``.hours``) are
resolved as Kafka's ``DynamicBrokerConfig`` does: the dynamic values overlay the static ones key by key,
then the first key of the synonym chain that is set anywhere wins, from the highest layer that sets it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from service.config.broker_config import DEFS_BY_NAME, DEFS_BY_TOPIC_NAME, BrokerConfig
from service.config.definitions import (
    ConfigSource,
    ConfigValue,
    InvalidConfigError,
    parse_value,
)

__all__ = [
    "CONSUMER_OFFSETS_TOPIC",
    "INTERNAL_TOPICS",
    "NO_DYNAMIC_CONFIGS",
    "TRANSACTION_STATE_TOPIC",
    "DynamicConfigs",
    "internal_topic_defaults",
    "resolve_broker_value",
]

logger = logging.getLogger(__name__)

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})  # Kafka creates them itself
_EMPTY: Mapping[str, str] = MappingProxyType({})
_MS_PER_UNIT = {"ms": 1, "minutes": 60_000, "hours": 3_600_000}


@dataclass(frozen=True, slots=True)
class DynamicConfigs:
    """What a metadata log says about configs, checked: values logcleaner would reject are dropped.

    ``topic_configs``: per topic, its configs (Kafka's topic names and strings). ``node``: this broker's
    dynamic configs; ``cluster``: the cluster-wide defaults (broker key names and strings).
    """

    topic_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    node: Mapping[str, str] = field(default_factory=dict)
    cluster: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def checked(
        cls,
        topic_configs: Mapping[str, Mapping[str, str]],
        node: Mapping[str, str],
        cluster: Mapping[str, str],
    ) -> DynamicConfigs:
        """Keep the values logcleaner knows and accepts; log one warning per value it drops.

        Keys logcleaner has no use for (``min.insync.replicas``, ``compression.type`` …) are kept out
        quietly; a known key with a value logcleaner rejects is logged and left to the layers below.
        """
        topics = {
            topic: _checked(configs, f"topic {topic}", topic_level=True)
            for topic, configs in topic_configs.items()
        }
        return cls(
            {topic: configs for topic, configs in topics.items() if configs},
            _checked(node, "this broker", topic_level=False),
            _checked(cluster, "the cluster default", topic_level=False),
        )

    def for_topic(self, topic: str) -> Mapping[str, str]:
        return self.topic_configs.get(topic, _EMPTY)


NO_DYNAMIC_CONFIGS = DynamicConfigs()


def _checked(configs: Mapping[str, str], owner: str, *, topic_level: bool) -> dict[str, str]:
    table = DEFS_BY_TOPIC_NAME if topic_level else DEFS_BY_NAME
    kept: dict[str, str] = {}
    for name, raw in configs.items():
        defn = table.get(name)
        if defn is None:
            continue
        try:
            parse_value(defn, raw, topic=topic_level)
        except InvalidConfigError as exc:
            logger.warning("metadata log: config %s=%r of %s ignored: %s", name, raw, owner, exc)
            continue
        kept[name] = raw
    return kept


def internal_topic_defaults(topic: str, broker: BrokerConfig) -> Mapping[str, str]:
    """The configs Kafka creates its internal topics with (``GroupCoordinator``'s and
    ``TransactionStateManager``'s topic properties), in Kafka's string form; empty for any other topic."""
    if topic == CONSUMER_OFFSETS_TOPIC:
        return {"cleanup.policy": "compact", "segment.bytes": str(broker.offsets_topic_segment_bytes)}
    if topic == TRANSACTION_STATE_TOPIC:
        return {"cleanup.policy": "compact", "segment.bytes": str(broker.transaction_state_log_segment_bytes)}
    return _EMPTY


def resolve_broker_value(
    broker: BrokerConfig, key: str, dynamic: DynamicConfigs
) -> tuple[ConfigValue, ConfigSource]:
    """The value of broker ``key`` with the dynamic layers over the file, and where it came from."""
    for name in (key, *DEFS_BY_NAME[key].synonyms):
        for layer in (dynamic.node, dynamic.cluster):
            raw = layer.get(name)
            if raw is not None:
                return _in_units_of(key, name, parse_value(DEFS_BY_NAME[name], raw)), "broker-dynamic"
        if name in broker.explicit_keys:
            break
    value = broker.broker_value(key)
    if value is None:  # every key a topic config falls back to has a value; None would be a table bug
        raise TypeError(f"{key} has no value")
    return value, broker.source_of(key)


def _in_units_of(key: str, name: str, value: ConfigValue) -> ConfigValue:
    """A synonym's value in the unit of ``key`` (``log.retention.hours`` → ms); negative retention: -1."""
    if not isinstance(value, int) or isinstance(value, bool):
        return value
    if name != key:
        value *= _MS_PER_UNIT.get(name.rsplit(".", 1)[1], 1)
    return max(value, -1) if key == "log.retention.ms" else value

"""Topic-level configuration: the layers of ``config_layers`` over the broker config, as Kafka's
``LogConfig.fromProps`` puts a topic's configs over the broker's.

A topic config's value is logcleaner's override if there is one, else the topic's config in the metadata
log, else an internal topic's creation default, else the broker key it is the synonym of (dynamic, then
the file, resolved through its synonyms ``log.retention.ms`` → ``.minutes`` → ``.hours``), else the
default. Topic-level values are kept as Kafka's strings and parsed here with the topic-level validators.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from service.config.broker_config import DEFS_BY_TOPIC_NAME, BrokerConfig
from service.config.config_layers import (
    NO_DYNAMIC_CONFIGS,
    DynamicConfigs,
    internal_topic_defaults,
    resolve_broker_value,
)
from service.config.definitions import (
    ConfigDef,
    ConfigSource,
    ConfigValue,
    InvalidConfigError,
    format_value,
    parse_value,
)
from service.storage.log_config import LogConfig
from service.storage.records import TimestampType

__all__ = [
    "TOPIC_CONFIG_NAMES",
    "ConfigEntry",
    "describe_topic_config",
    "effective_log_config",
    "topic_config_def",
    "typed_overrides",
    "validate_topic_overrides",
]

TOPIC_CONFIG_NAMES: tuple[str, ...] = tuple(sorted(DEFS_BY_TOPIC_NAME))
_TIMESTAMP_TYPES = {t.label: t for t in TimestampType}


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One effective topic config, as ``GET /v1/topics/{t}/configs`` shows it.

    ``value`` is JSON-friendly: numbers and booleans as such, lists in Kafka's string form
    (``"compact,delete"``).
    """

    name: str
    value: int | float | bool | str
    source: ConfigSource


def validate_topic_overrides(changes: Mapping[str, object]) -> dict[str, str]:
    """Check topic-level ``changes`` (strings or JSON numbers) and return them in Kafka's string form.

    Raises :class:`~service.config.definitions.InvalidConfigError` for an unknown topic config name
    (listing the allowed names) or a value that is not allowed (naming key, value and what is allowed).
    """
    normalized: dict[str, str] = {}
    for name, raw in changes.items():
        defn = topic_config_def(name)
        if not isinstance(raw, (str, int, float)):  # bool is an int
            raise InvalidConfigError(
                f"Invalid value {raw!r} for configuration {name}: must be a string or a number",
                name=name,
                value=raw,
            )
        normalized[name] = format_value(parse_value(defn, raw, topic=True))
    return normalized


def effective_log_config(
    broker: BrokerConfig,
    overrides: Mapping[str, str],
    *,
    topic: str | None = None,
    dynamic: DynamicConfigs = NO_DYNAMIC_CONFIGS,
    configs_unknown: bool = False,
) -> LogConfig:
    """The ``LogConfig`` one topic's partitions obey: ``overrides`` over the metadata log's configs
    (``dynamic``, for ``topic``) over ``broker`` over the defaults; ``config_sources`` says which won.
    ``configs_unknown``: the topic's own configs are not known (``is_unknown_topic_config``): what falls to
    the broker's values is marked ``unknown``, and the log is held (``LogConfig.configs_unknown``)."""
    v = _Effective(broker, overrides, topic, dynamic, configs_unknown)
    return LogConfig(
        segment_bytes=v.integer("segment.bytes"),
        segment_ms=v.integer("segment.ms"),
        segment_jitter_ms=v.integer("segment.jitter.ms"),
        segment_index_bytes=v.integer("segment.index.bytes"),
        index_interval_bytes=v.integer("index.interval.bytes"),
        max_message_bytes=v.integer("max.message.bytes"),
        message_timestamp_type=_TIMESTAMP_TYPES[str(v.value("message.timestamp.type"))],
        message_timestamp_before_max_ms=v.integer("message.timestamp.before.max.ms"),
        message_timestamp_after_max_ms=v.integer("message.timestamp.after.max.ms"),
        cleanup_policy=frozenset(v.items("cleanup.policy")),
        retention_ms=v.integer("retention.ms"),
        retention_bytes=v.integer("retention.bytes"),
        delete_retention_ms=v.integer("delete.retention.ms"),
        min_compaction_lag_ms=v.integer("min.compaction.lag.ms"),
        max_compaction_lag_ms=v.integer("max.compaction.lag.ms"),
        min_cleanable_dirty_ratio=v.real("min.cleanable.dirty.ratio"),
        file_delete_delay_ms=v.integer("file.delete.delay.ms"),
        flush_messages=v.integer("flush.messages"),
        flush_ms=v.integer("flush.ms"),
        preallocate=v.value("preallocate") is True,
        config_sources=tuple((name, v.source(name)) for name in TOPIC_CONFIG_NAMES),
        configs_unknown=configs_unknown,
    )


def describe_topic_config(
    broker: BrokerConfig,
    overrides: Mapping[str, str],
    *,
    topic: str | None = None,
    dynamic: DynamicConfigs = NO_DYNAMIC_CONFIGS,
    configs_unknown: bool = False,
) -> dict[str, ConfigEntry]:
    """Every topic config with its effective value and where it came from, sorted by name."""
    v = _Effective(broker, overrides, topic, dynamic, configs_unknown)
    entries: dict[str, ConfigEntry] = {}
    for name in TOPIC_CONFIG_NAMES:
        value = v.value(name)
        shown = format_value(value) if isinstance(value, tuple) else value
        entries[name] = ConfigEntry(name, shown, v.source(name))
    return entries


def typed_overrides(overrides: Mapping[str, str]) -> dict[str, int | float | bool | str]:
    """Topic overrides (Kafka's strings) as the JSON documents give values: numbers and booleans as such,
    lists in Kafka's string form (``"compact,delete"``)."""
    typed: dict[str, int | float | bool | str] = {}
    for name, raw in overrides.items():
        value = parse_value(topic_config_def(name), raw, topic=True)
        typed[name] = format_value(value) if isinstance(value, tuple) else value
    return typed


def topic_config_def(name: str) -> ConfigDef:
    """The table row whose topic name is ``name``; ``InvalidConfigError`` listing the names if none."""
    defn = DEFS_BY_TOPIC_NAME.get(name)
    if defn is None:
        raise InvalidConfigError(
            f"Unknown topic config name {name!r}; allowed: {', '.join(TOPIC_CONFIG_NAMES)}",
            name=name,
            value=None,
        )
    return defn


class _Effective:
    """The effective values of one topic, parsed lazily; typed getters narrow for ``LogConfig``."""

    def __init__(
        self,
        broker: BrokerConfig,
        overrides: Mapping[str, str],
        topic: str | None,
        dynamic: DynamicConfigs,
        configs_unknown: bool = False,
    ) -> None:
        self._broker = broker
        self._dynamic = dynamic
        self._configs_unknown = configs_unknown
        self._resolved: dict[str, tuple[ConfigValue, ConfigSource]] = {}
        for name in overrides:
            topic_config_def(name)  # an unknown name is an error here too, not silently ignored
        # The topic-level layers, highest first; the metadata's values were checked when it was read.
        self._topic_layers: tuple[tuple[Mapping[str, str], ConfigSource], ...] = (
            (overrides, "override"),
            (dynamic.for_topic(topic) if topic is not None else {}, "metadata"),
            (internal_topic_defaults(topic, broker) if topic is not None else {}, "internal-topic-default"),
        )

    def resolved(self, name: str) -> tuple[ConfigValue, ConfigSource]:
        """The value of ``name`` and its source, resolved once."""
        found = self._resolved.get(name)
        if found is None:
            found = self._resolve(name)
            self._resolved[name] = found
        return found

    def _resolve(self, name: str) -> tuple[ConfigValue, ConfigSource]:
        defn = DEFS_BY_TOPIC_NAME[name]
        for layer, source in self._topic_layers:
            if name in layer:
                return parse_value(defn, layer[name], topic=True), source
        value, source = resolve_broker_value(self._broker, defn.name, self._dynamic)
        return value, "unknown" if self._configs_unknown else source

    def value(self, name: str) -> ConfigValue:
        return self.resolved(name)[0]

    def source(self, name: str) -> ConfigSource:
        return self.resolved(name)[1]

    def integer(self, name: str) -> int:
        value = self.value(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError(f"{name} is not an integer: {value!r}")

    def real(self, name: str) -> float:
        value = self.value(name)
        if isinstance(value, float):
            return value
        raise TypeError(f"{name} is not a number: {value!r}")

    def items(self, name: str) -> tuple[str, ...]:
        value = self.value(name)
        if isinstance(value, tuple):
            return value
        raise TypeError(f"{name} is not a list: {value!r}")

"""Topic configs: override > broker synonym > default, their sources, and override validation."""

from __future__ import annotations

import pytest

from service.base.errors import InvalidInputError
from service.config.broker_config import BrokerConfig
from service.config.definitions import InvalidConfigError
from service.config.topic_config import (
    TOPIC_CONFIG_NAMES,
    ConfigEntry,
    describe_topic_config,
    effective_log_config,
    validate_topic_overrides,
)
from service.storage.log_config import LONG_MAX, LogConfig
from service.storage.records import TimestampType


def _broker(props: dict[str, str]) -> BrokerConfig:
    config, warnings = BrokerConfig.from_properties(props)
    assert warnings == []
    return config


def test_defaults_give_log_config_defaults() -> None:
    assert effective_log_config(BrokerConfig.defaults(), {}) == LogConfig()


def test_topic_override_beats_broker_beats_default() -> None:
    broker = _broker(
        {"log.retention.hours": "1", "log.segment.bytes": "1000", "log.cleanup.policy": "compact"}
    )
    config = effective_log_config(broker, {"segment.bytes": "14", "message.timestamp.type": "LogAppendTime"})
    assert config.segment_bytes == 14  # topic
    assert config.retention_ms == 3_600_000  # broker, through log.retention.hours
    assert config.cleanup_policy == frozenset({"compact"})  # broker
    assert config.message_timestamp_type is TimestampType.LOG_APPEND_TIME  # topic
    assert config.delete_retention_ms == 86_400_000  # default


def test_every_broker_synonym_reaches_the_log_config() -> None:
    broker = _broker(
        {
            "log.segment.bytes": "100",
            "log.roll.ms": "101",
            "log.roll.jitter.ms": "102",
            "log.index.size.max.bytes": "103",
            "log.index.interval.bytes": "104",
            "message.max.bytes": "105",
            "log.message.timestamp.type": "LogAppendTime",
            "log.message.timestamp.before.max.ms": "106",
            "log.message.timestamp.after.max.ms": "107",
            "log.cleanup.policy": "compact,delete",
            "log.retention.ms": "108",
            "log.retention.bytes": "109",
            "log.cleaner.delete.retention.ms": "110",
            "log.cleaner.min.compaction.lag.ms": "111",
            "log.cleaner.max.compaction.lag.ms": "112",
            "log.cleaner.min.cleanable.ratio": "0.25",
            "log.segment.delete.delay.ms": "113",
            "log.flush.interval.messages": "114",
            "log.flush.interval.ms": "115",
            "log.preallocate": "true",
        }
    )
    assert effective_log_config(broker, {}) == LogConfig(
        segment_bytes=100,
        segment_ms=101,
        segment_jitter_ms=102,
        segment_index_bytes=103,
        index_interval_bytes=104,
        max_message_bytes=105,
        message_timestamp_type=TimestampType.LOG_APPEND_TIME,
        message_timestamp_before_max_ms=106,
        message_timestamp_after_max_ms=107,
        cleanup_policy=frozenset({"compact", "delete"}),
        retention_ms=108,
        retention_bytes=109,
        delete_retention_ms=110,
        min_compaction_lag_ms=111,
        max_compaction_lag_ms=112,
        min_cleanable_dirty_ratio=0.25,
        file_delete_delay_ms=113,
        flush_messages=114,
        flush_ms=115,
        preallocate=True,
    )
    assert all(entry.source == "broker" for entry in describe_topic_config(broker, {}).values())


def test_describe_gives_every_topic_config_with_its_source() -> None:
    broker = _broker({"log.retention.minutes": "10", "log.cleanup.policy": "compact, delete"})
    entries = describe_topic_config(broker, {"min.cleanable.dirty.ratio": "0.1", "retention.ms": "-1"})
    assert list(entries) == sorted(TOPIC_CONFIG_NAMES) and len(entries) == 20
    assert entries["retention.ms"] == ConfigEntry("retention.ms", -1, "override")
    assert entries["min.cleanable.dirty.ratio"] == ConfigEntry("min.cleanable.dirty.ratio", 0.1, "override")
    assert entries["cleanup.policy"] == ConfigEntry("cleanup.policy", "compact,delete", "broker")
    assert entries["segment.bytes"] == ConfigEntry("segment.bytes", 1_073_741_824, "default")
    assert entries["max.compaction.lag.ms"] == ConfigEntry("max.compaction.lag.ms", LONG_MAX, "default")
    assert entries["preallocate"] == ConfigEntry("preallocate", False, "default")
    assert entries["message.timestamp.type"] == ConfigEntry("message.timestamp.type", "CreateTime", "default")


def test_broker_retention_hours_makes_retention_ms_a_broker_value() -> None:
    entries = describe_topic_config(_broker({"log.retention.hours": "48"}), {})
    assert entries["retention.ms"] == ConfigEntry("retention.ms", 172_800_000, "broker")


def test_validate_normalizes_strings_and_numbers() -> None:
    assert validate_topic_overrides(
        {
            "retention.ms": -1,
            "segment.bytes": " 14 ",
            "cleanup.policy": "delete , compact",
            "min.cleanable.dirty.ratio": 1,
            "preallocate": "TRUE",
            "message.timestamp.type": "LogAppendTime",
        }
    ) == {
        "retention.ms": "-1",
        "segment.bytes": "14",
        "cleanup.policy": "delete,compact",
        "min.cleanable.dirty.ratio": "1.0",
        "preallocate": "true",
        "message.timestamp.type": "LogAppendTime",
    }
    assert validate_topic_overrides({}) == {}


def test_unknown_topic_config_name_lists_the_allowed_names() -> None:
    with pytest.raises(InvalidInputError) as info:
        validate_topic_overrides({"log.retention.ms": "1"})
    assert "'log.retention.ms'" in str(info.value)
    assert "retention.ms, segment.bytes" in str(info.value)
    assert isinstance(info.value, InvalidConfigError) and info.value.name == "log.retention.ms"


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("retention.ms", "-2", "[-1, 9223372036854775807]"),
        ("retention.ms", "forever", "integer"),
        ("segment.bytes", 13, "[14, 2147483647]"),
        ("segment.ms", 0, "[1, "),
        ("cleanup.policy", "compact,archive", "compact, delete"),
        ("cleanup.policy", "", "non-empty"),
        ("min.cleanable.dirty.ratio", "1.01", "[0.0, 1.0]"),
        ("preallocate", "yes", "true or false"),
        ("message.timestamp.type", "createtime", "CreateTime, LogAppendTime"),
        ("max.compaction.lag.ms", "0", "[1, "),
        ("segment.index.bytes", "3", "[4, "),
    ],
)
def test_bad_override_value_names_key_value_and_allowed(name: str, value: str | int, allowed: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        validate_topic_overrides({name: value})
    message = str(info.value)
    assert f"configuration {name}:" in message
    assert (repr(value) if isinstance(value, str) else str(value)) in message
    assert allowed in message


@pytest.mark.parametrize("value", [None, ["compact"], {"a": 1}])
def test_override_values_must_be_strings_or_numbers(value: object) -> None:
    with pytest.raises(InvalidInputError, match=r"cleanup\.policy.*string or a number"):
        validate_topic_overrides({"cleanup.policy": value})


def test_effective_config_rejects_an_unknown_stored_name() -> None:
    with pytest.raises(InvalidInputError, match="Unknown topic config name"):
        effective_log_config(BrokerConfig.defaults(), {"retention.hours": "1"})

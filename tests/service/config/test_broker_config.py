"""BrokerConfig: server.properties syntax, overrides, synonyms, warnings and fail-fast errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.errors import InvalidInputError
from service.config.broker_config import EMBEDDED_LOG_DIRS, BrokerConfig, load_broker_config
from service.config.definitions import CONFIG_DEFS
from service.storage.log_config import LONG_MAX

# The values every module downstream relies on, resolved (hours → ms and so on).
RESOLVED_DEFAULTS: dict[str, object] = {
    "log_dirs": ("./data/logs",),
    "log_segment_bytes": 1_073_741_824,
    "log_roll_ms": 604_800_000,
    "log_roll_jitter_ms": 0,
    "log_retention_ms": 604_800_000,
    "log_retention_bytes": -1,
    "log_retention_check_interval_ms": 300_000,
    "log_cleanup_policy": ("delete",),
    "log_cleaner_enable": True,
    "log_cleaner_threads": 1,
    "log_cleaner_min_cleanable_ratio": 0.5,
    "log_cleaner_backoff_ms": 15_000,
    "log_cleaner_dedupe_buffer_size": 134_217_728,
    "log_cleaner_io_buffer_size": 524_288,
    "log_cleaner_io_buffer_load_factor": 0.9,
    "log_cleaner_delete_retention_ms": 86_400_000,
    "log_cleaner_min_compaction_lag_ms": 0,
    "log_cleaner_max_compaction_lag_ms": LONG_MAX,
    "log_message_timestamp_type": "CreateTime",
    "log_message_timestamp_after_max_ms": LONG_MAX,
    "log_flush_interval_messages": LONG_MAX,
    "log_flush_interval_ms": LONG_MAX,
    "log_flush_scheduler_interval_ms": LONG_MAX,
    "log_flush_offset_checkpoint_interval_ms": 60_000,
    "log_flush_start_offset_checkpoint_interval_ms": 60_000,
    "replica_high_watermark_checkpoint_interval_ms": 5000,
    "log_index_interval_bytes": 4096,
    "log_index_size_max_bytes": 10_485_760,
    "log_segment_delete_delay_ms": 60_000,
    "log_preallocate": False,
    "num_recovery_threads_per_data_dir": 1,
    "num_partitions": 1,
    "message_max_bytes": 1_048_588,
    "api_host": "127.0.0.1",
    "api_port": 8080,
    "api_auth_token_file": None,
    "scheduler_initial_delay_ms": 30_000,
    "shutdown_timeout_ms": 30_000,
    "spark_master": "local[*]",
}


def _config(**props: str) -> BrokerConfig:
    config, warnings = BrokerConfig.from_properties({k.replace("_", "."): v for k, v in props.items()})
    assert warnings == []
    return config


def test_defaults_resolve_to_kafkas_values() -> None:
    config = BrokerConfig.defaults()
    for attribute, expected in RESOLVED_DEFAULTS.items():
        assert getattr(config, attribute) == expected, attribute
    assert dict(config.spark_conf) == {"spark.master": "local[*]"}
    assert config.explicit_keys == frozenset()
    assert all(config.source_of(d.name) == "default" for d in CONFIG_DEFS)


@pytest.mark.parametrize(
    ("props", "expected_ms"),
    [
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.minutes": "2", "log.retention.hours": "1"}, 120_000),
        ({"log.retention.ms": "5", "log.retention.minutes": "2", "log.retention.hours": "1"}, 5),
        ({"log.retention.ms": "-5"}, -1),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.minutes": "-3", "log.retention.hours": "10"}, -1),
    ],
)
def test_retention_ms_wins_over_minutes_over_hours(props: dict[str, str], expected_ms: int) -> None:
    config, _ = BrokerConfig.from_properties(props)
    assert config.log_retention_ms == expected_ms
    assert config.source_of("log.retention.ms") == "broker"


@pytest.mark.parametrize(
    ("props", "roll_ms", "jitter_ms"),
    [
        ({"log.roll.hours": "2", "log.roll.jitter.hours": "1"}, 7_200_000, 3_600_000),
        ({"log.roll.ms": "1000", "log.roll.hours": "2"}, 1000, 0),
        ({"log.roll.jitter.ms": "7", "log.roll.jitter.hours": "1"}, 604_800_000, 7),
    ],
)
def test_roll_and_jitter_ms_win_over_hours(props: dict[str, str], roll_ms: int, jitter_ms: int) -> None:
    config, _ = BrokerConfig.from_properties(props)
    assert (config.log_roll_ms, config.log_roll_jitter_ms) == (roll_ms, jitter_ms)


def test_flush_interval_falls_back_to_the_scheduler_interval() -> None:
    assert _config(log_flush_scheduler_interval_ms="500").log_flush_interval_ms == 500
    config = _config(log_flush_scheduler_interval_ms="500", log_flush_interval_ms="9")
    assert (config.log_flush_interval_ms, config.log_flush_scheduler_interval_ms) == (9, 500)


def test_log_dirs_is_a_comma_list_and_wins_over_log_dir() -> None:
    config, _ = BrokerConfig.from_properties({"log.dirs": "/a , /b,", "log.dir": "/c"})
    assert config.log_dirs == ("/a", "/b")
    assert BrokerConfig.from_properties({"log.dir": "/c"})[0].log_dirs == ("/c",)
    assert BrokerConfig.defaults().log_dirs == EMBEDDED_LOG_DIRS == ("./data/logs",)
    assert BrokerConfig.from_properties({"log.dir": "/c"})[0].source_of("log.dirs") == "broker"


def test_empty_log_dirs_is_invalid() -> None:
    with pytest.raises(InvalidInputError, match=r"log\.dirs.*one or more directories"):
        BrokerConfig.from_properties({"log.dirs": " , "})


def test_properties_file_syntax(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# a comment\n"
        "! another comment\n"
        "log.dirs=/data/one,\\\n"
        "    /data/two\n"
        "log.retention.hours: 24\n"
        "log.cleanup.policy = compact, delete\n"
        "api.host   127.0.0.2\n"
        "spark.app.name=log\\u0063leaner \\\\ \\= x\n",
        encoding="latin-1",
    )
    config, warnings = load_broker_config(path, [])
    assert warnings == []
    assert config.log_dirs == ("/data/one", "/data/two")
    assert config.log_retention_ms == 86_400_000
    assert config.log_cleanup_policy == ("compact", "delete")
    assert config.api_host == "127.0.0.2"
    assert config.spark_conf["spark.app.name"] == "logcleaner \\ = x"


def test_a_value_ending_in_what_looks_like_a_comment_is_kept_and_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# comments on lines of their own are fine\n"
        "log.retention.hours=\\\n"
        "    24\n"
        "\n"
        "log.dirs=/data/logs            # the same path on every worker\n"
        "api.host=127.0.0.1#not-after-a-space\n",
        encoding="latin-1",
    )
    config, warnings = load_broker_config(path, [])
    assert config.log_dirs == ("/data/logs            # the same path on every worker",), "as Kafka reads it"
    [warning] = warnings
    assert warning.startswith(f"config file {path}, line 5: the value of 'log.dirs' is ")
    assert "'# the same path on every worker'" in warning and "lines of their own" in warning


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("log.segment.bytes=1000\nnum.partitions=3\n", encoding="latin-1")
    config, _ = load_broker_config(path, ["log.segment.bytes=14", "log.cleaner.enable = false"])
    assert (config.log_segment_bytes, config.num_partitions, config.log_cleaner_enable) == (14, 3, False)


def test_no_file_serves_embedded_defaults() -> None:
    config, warnings = load_broker_config(None, [])
    assert config == BrokerConfig.defaults()
    assert warnings == []


def test_missing_file_and_malformed_override_are_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="does not exist"):
        load_broker_config(tmp_path / "nope.properties", [])
    with pytest.raises(InvalidInputError, match="key=value"):
        load_broker_config(None, ["log.segment.bytes"])


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("log.segment.bytes", "13", "[14, 2147483647]"),
        ("log.retention.ms", "abc", "integer"),
        ("log.retention.check.interval.ms", "0", "[1, 9223372036854775807]"),
        ("log.cleanup.policy", "compact,archive", "compact, delete"),
        ("log.cleaner.enable", "yes", "true or false"),
        ("log.cleaner.min.cleanable.ratio", "2", "[0.0, 1.0]"),
        ("log.message.timestamp.type", "WallClock", "CreateTime, LogAppendTime"),
        ("log.index.size.max.bytes", "3", "[4, 2147483647]"),
        ("log.cleaner.max.compaction.lag.ms", "0", "[1, "),
        ("api.port", "-1", "[0, 65535]"),
        ("scheduler.initial.delay.ms", "-1", "[0, "),
    ],
)
def test_invalid_value_names_key_value_and_allowed(key: str, value: str, allowed: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        BrokerConfig.from_properties({key: value})
    message = str(info.value)
    assert key in message
    assert repr(value) in message
    assert allowed in message


def test_an_invalid_override_fails_too(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"log\.segment\.bytes"):
        load_broker_config(None, ["log.segment.bytes=13"])


def test_unknown_keys_warn_and_name_the_key() -> None:
    """``broker.id`` is Kafka's: listed, not warned about; a topic config's name is."""
    config, warnings = BrokerConfig.from_properties(
        {"broker.id": "0", "retention.ms": "1", "num.partitions": "2", "bogus.key": "x"}
    )
    assert config.num_partitions == 2 and config.ignored_broker_keys == ("broker.id",)
    assert len(warnings) == 2
    assert "'retention.ms'" in warnings[0] and "'log.retention.ms'" in warnings[0]
    assert "'bogus.key'" in warnings[1]


def test_spark_keys_pass_through_without_warning() -> None:
    config, warnings = BrokerConfig.from_properties(
        {"spark.master": "local[2]", "spark.executor.memory": "2g", "spark.sql.shuffle.partitions": " 4 "}
    )
    assert warnings == []
    assert config.spark_master == "local[2]"
    assert dict(config.spark_conf) == {
        "spark.master": "local[2]",
        "spark.executor.memory": "2g",
        "spark.sql.shuffle.partitions": "4",
    }
    assert config.source_of("spark.executor.memory") == "broker"
    assert config.broker_value("spark.executor.memory") == "2g"
    assert config.broker_value("spark.unset") is None


def test_source_of_and_broker_value() -> None:
    config = _config(log_retention_hours="1", log_cleaner_threads="4")
    assert config.source_of("log.retention.hours") == "broker"
    assert config.source_of("log.retention.ms") == "broker"  # resolved from a set synonym
    assert config.source_of("log.retention.minutes") == "default"
    assert config.source_of("log.segment.bytes") == "default"
    assert config.broker_value("log.retention.ms") == 3_600_000
    assert config.broker_value("log.retention.minutes") is None
    assert config.broker_value("log.cleaner.threads") == 4
    assert config.broker_value("log.cleanup.policy") == ("delete",)
    with pytest.raises(KeyError):
        config.broker_value("no.such.key")
    with pytest.raises(KeyError):
        config.source_of("no.such.key")


def test_broker_config_is_frozen() -> None:
    config = BrokerConfig.defaults()
    with pytest.raises(AttributeError):
        config.num_partitions = 5  # type: ignore[misc]  # the point: assignment must fail
    with pytest.raises(TypeError):
        config.spark_conf["spark.x"] = "y"  # type: ignore[index]  # a read-only mapping

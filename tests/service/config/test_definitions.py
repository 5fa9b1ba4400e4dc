"""The config table: Kafka's names and defaults, validators, and parse/format round trips."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.base.errors import InvalidInputError
from service.config.broker_config import BrokerConfig
from service.config.definitions import (
    CONFIG_DEFS,
    DEFS_BY_NAME,
    DEFS_BY_TOPIC_NAME,
    ConfigDef,
    ConfigType,
    ConfigValue,
    InvalidConfigError,
    Range,
    ValidList,
    ValidPattern,
    ValidString,
    format_value,
    parse_value,
)
from service.storage.log_config import LONG_MAX, LogConfig

# Kafka 3.x's defaults, written out independently of the table.
KAFKA_DEFAULTS: dict[str, object] = {
    "log.dirs": None,
    "log.dir": "/tmp/kafka-logs",
    "log.segment.bytes": 1_073_741_824,
    "log.roll.ms": None,
    "log.roll.hours": 168,
    "log.roll.jitter.ms": None,
    "log.roll.jitter.hours": 0,
    "log.retention.ms": None,
    "log.retention.minutes": None,
    "log.retention.hours": 168,
    "log.retention.bytes": -1,
    "log.retention.check.interval.ms": 300_000,
    "log.cleanup.policy": ("delete",),
    "log.cleaner.enable": True,
    "log.cleaner.threads": 1,
    "log.cleaner.min.cleanable.ratio": 0.5,
    "log.cleaner.backoff.ms": 15_000,
    "log.cleaner.dedupe.buffer.size": 134_217_728,
    "log.cleaner.io.buffer.size": 524_288,
    "log.cleaner.io.buffer.load.factor": 0.9,
    "log.cleaner.io.max.bytes.per.second": sys.float_info.max,
    "log.cleaner.delete.retention.ms": 86_400_000,
    "log.cleaner.min.compaction.lag.ms": 0,
    "log.cleaner.max.compaction.lag.ms": LONG_MAX,
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": LONG_MAX,
    "log.message.timestamp.after.max.ms": LONG_MAX,
    "log.flush.interval.messages": LONG_MAX,
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": LONG_MAX,
    "log.flush.offset.checkpoint.interval.ms": 60_000,
    "log.flush.start.offset.checkpoint.interval.ms": 60_000,
    "log.index.interval.bytes": 4096,
    "log.index.size.max.bytes": 10_485_760,
    "log.segment.delete.delay.ms": 60_000,
    "log.preallocate": False,
    "producer.id.expiration.ms": 86_400_000,
    "producer.id.expiration.check.interval.ms": 600_000,
    "num.recovery.threads.per.data.dir": 1,
    "num.partitions": 1,
    "message.max.bytes": 1_048_588,
    "api.host": "127.0.0.1",
    "api.port": 8080,
    "api.auth.token.file": None,
    "api.auth.allow.anonymous": False,
    "api.allowed.hosts": (),
    "api.allowed.origins": (),
    "api.max.request.bytes": 10_485_760,
    "api.max.records.per.request": 10_000,
    "api.max.fetch.records": 10_000,
    "api.max.fetch.bytes": 52_428_800,
    "scheduler.initial.delay.ms": 30_000,
    "shutdown.timeout.ms": 30_000,
    "log.cleaner.engine": "auto",
    "log.cleaner.spark.min.bytes": 16 << 30,
    "log.cleaner.spark.max.logs.per.job": 8,
    "log.cleaner.uncleanable.retry.backoff.ms": 600_000,
    "log.cleaner.spill.dir": None,
    "spark.master": "local[*]",
    "offsets.topic.segment.bytes": 104_857_600,
    "transaction.state.log.segment.bytes": 104_857_600,
    "metadata.log.dir": None,
    "metadata.log.ignore": False,
    "unknown.topic.configs": "hold",
    "replica.high.watermark.checkpoint.interval.ms": 5000,
}

# Broker key → topic key (Kafka's ``ServerTopicConfigSynonyms``).
KAFKA_TOPIC_SYNONYMS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "message.max.bytes": "max.message.bytes",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.preallocate": "preallocate",
}


def test_table_has_exactly_kafkas_keys_and_defaults() -> None:
    assert {d.name: d.default for d in CONFIG_DEFS} == KAFKA_DEFAULTS
    assert len(DEFS_BY_NAME) == len(CONFIG_DEFS)  # no duplicate rows


def test_topic_synonyms_are_kafkas() -> None:
    assert {d.name: d.topic_name for d in CONFIG_DEFS if d.topic_name} == KAFKA_TOPIC_SYNONYMS


def test_every_topic_config_is_a_log_config_field() -> None:
    fields = set(LogConfig.__dataclass_fields__) - {"config_sources", "configs_unknown"}  # provenance
    assert {name.replace(".", "_") for name in DEFS_BY_TOPIC_NAME} == fields


def test_every_row_is_a_broker_config_field() -> None:
    fields = set(BrokerConfig.__dataclass_fields__)
    assert {d.attribute for d in CONFIG_DEFS} <= fields
    assert fields - {d.attribute for d in CONFIG_DEFS} == {
        "spark_conf",
        "explicit_keys",
        "ignored_broker_keys",
        "log_dir_paths",
    }


@pytest.mark.parametrize("defn", [d for d in CONFIG_DEFS if d.default is not None], ids=lambda d: d.name)
def test_every_default_passes_its_own_validators(defn: ConfigDef) -> None:
    assert defn.default is not None
    assert parse_value(defn, format_value(defn.default)) == defn.default
    if defn.topic_name:
        assert parse_value(defn, format_value(defn.default), topic=True) == defn.default


def test_every_synonym_is_a_row_and_every_row_has_a_doc() -> None:
    for defn in CONFIG_DEFS:
        assert defn.doc and "\n" not in defn.doc
        assert all(s in DEFS_BY_NAME for s in defn.synonyms)


def test_minimums_named_in_the_contract() -> None:
    assert DEFS_BY_NAME["log.segment.bytes"].validator == Range(14)
    assert DEFS_BY_NAME["log.index.size.max.bytes"].validator == Range(4)
    assert DEFS_BY_NAME["log.cleaner.max.compaction.lag.ms"].validator == Range(1)
    assert DEFS_BY_NAME["log.cleaner.min.cleanable.ratio"].validator == Range(0.0, 1.0)
    assert DEFS_BY_NAME["api.port"].validator == Range(0, 65535)
    assert DEFS_BY_NAME["log.cleanup.policy"].validator == ValidList(("compact", "delete"))
    assert DEFS_BY_NAME["log.message.timestamp.type"].validator == ValidString(
        ("CreateTime", "LogAppendTime")
    )


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("log.segment.bytes", " 14 ", 14),
        ("log.segment.bytes", 1024, 1024),
        ("log.retention.ms", "+5", 5),
        ("log.retention.ms", "-2", -2),
        ("log.cleaner.min.cleanable.ratio", "0.25", 0.25),
        ("log.cleaner.min.cleanable.ratio", 1, 1.0),
        ("log.cleaner.io.max.bytes.per.second", "1.7976931348623157E308", sys.float_info.max),
        ("log.cleaner.enable", "FALSE", False),
        ("log.cleaner.enable", " True ", True),
        ("log.preallocate", True, True),
        ("log.cleanup.policy", " compact , delete ", ("compact", "delete")),
        ("log.cleanup.policy", "compact,compact", ("compact",)),
        ("log.message.timestamp.type", " LogAppendTime", "LogAppendTime"),
        ("log.dirs", "/a, /b,,", ("/a", "/b")),
    ],
)
def test_parse_value_accepts(name: str, raw: str | int | bool, expected: ConfigValue) -> None:
    assert parse_value(DEFS_BY_NAME[name], raw) == expected


@pytest.mark.parametrize(
    ("name", "raw", "fragments"),
    [
        ("log.retention.ms", "abc", ["LONG", "integer in"]),
        ("log.retention.ms", "1_000", ["LONG"]),
        ("log.retention.ms", 1.5, ["LONG"]),
        ("log.retention.ms", True, ["LONG"]),
        ("log.segment.bytes", "13", ["at least 14", "[14, 2147483647]"]),
        ("log.segment.bytes", "2147483648", ["INT", "[14, 2147483647]"]),
        ("log.cleanup.policy", "compact,foo", ["'foo'", "compact, delete"]),
        ("log.cleanup.policy", " ", ["must not be empty", "compact, delete"]),
        ("log.cleaner.enable", "yes", ["true or false"]),
        ("log.cleaner.enable", 1, ["true or false"]),
        ("log.cleaner.min.cleanable.ratio", "1.5", ["no more than 1.0", "[0.0, 1.0]"]),
        ("log.cleaner.min.cleanable.ratio", "nan", ["DOUBLE"]),
        ("log.message.timestamp.type", "createtime", ["CreateTime, LogAppendTime"]),
        ("api.port", "65536", ["[0, 65535]"]),
        ("num.partitions", "0", ["at least 1"]),
        ("api.host", 5, ["string"]),
        ("log.segment.bytes", -(1 << 31) - 1, ["out of the range of Kafka's INT type"]),
        ("log.retention.ms", "9223372036854775808", ["out of the range of Kafka's LONG type"]),
        ("log.retention.ms", "-9223372036854775809", ["LONG", "[-9223372036854775808, 9223372036854775807]"]),
        ("log.retention.ms", 1 << 64, ["out of the range of Kafka's LONG type"]),
    ],
)
def test_parse_value_rejects_naming_key_value_and_allowed(
    name: str, raw: str | int | float | bool, fragments: list[str]
) -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_value(DEFS_BY_NAME[name], raw)
    message = str(info.value)
    assert name in message
    assert (str(raw).lower() if isinstance(raw, bool) else str(raw)) in message
    assert "allowed:" in message
    for fragment in fragments:
        assert fragment in message
    assert isinstance(info.value, InvalidConfigError)
    assert info.value.name == name
    assert info.value.value == raw


@pytest.mark.parametrize("name", ["log.segment.bytes", "log.retention.ms", "log.cleaner.min.cleanable.ratio"])
@pytest.mark.parametrize(
    "raw",
    ["1" * 4301, "-" + "9" * 5000, 10**400, 10**5000, -(10**4400)],
    ids=["4301-digits", "minus-5000-nines", "int-401-digits", "int-5001-digits", "int-minus-4401-digits"],
)
def test_numbers_beyond_pythons_digit_limit_are_out_of_range_naming_the_key(
    name: str, raw: str | int
) -> None:
    """The probe's 4,301-digit value was a ValueError (500, a CLI traceback): it is a value out of range."""
    defn = DEFS_BY_NAME[name]
    with pytest.raises(InvalidConfigError) as info:
        parse_value(defn, raw)
    assert info.value.name == name
    message = str(info.value)
    assert name in message and "allowed:" in message and len(message) < 400, message


def test_leading_zeros_past_pythons_digit_limit_are_still_the_number() -> None:
    assert parse_value(DEFS_BY_NAME["log.retention.ms"], "-" + "0" * 4300 + "15") == -15
    with pytest.raises(InvalidConfigError, match="at least 14"):
        parse_value(DEFS_BY_NAME["log.segment.bytes"], " +" + "0" * 5000 + " ")


def test_topic_retention_ms_is_at_least_minus_one_while_the_broker_key_takes_any_negative() -> None:
    defn = DEFS_BY_NAME["log.retention.ms"]
    assert parse_value(defn, "-2") == -2
    with pytest.raises(
        InvalidInputError, match=r"'-2' for configuration retention\.ms: value must be at least -1"
    ):
        parse_value(defn, "-2", topic=True)


def _typed_values(defn: ConfigDef) -> st.SearchStrategy[ConfigValue]:
    validator = defn.validator_for(topic=True)
    if defn.type in (ConfigType.INT, ConfigType.LONG):
        bits = 31 if defn.type is ConfigType.INT else 63
        low = (
            int(validator.min) if isinstance(validator, Range) and validator.min is not None else -(1 << bits)
        )
        high = (
            int(validator.max)
            if isinstance(validator, Range) and validator.max is not None
            else (1 << bits) - 1
        )
        return st.integers(low, high)
    if defn.type is ConfigType.DOUBLE:
        if isinstance(validator, Range):
            return st.floats(0.0, 1.0)
        return st.floats(allow_nan=False, allow_infinity=False)
    if defn.type is ConfigType.BOOLEAN:
        return st.booleans()
    if isinstance(validator, ValidString):
        return st.sampled_from(validator.allowed)
    if isinstance(validator, ValidList):
        return st.lists(st.sampled_from(validator.allowed), min_size=1, unique=True).map(tuple)
    if isinstance(validator, ValidPattern):
        return st.lists(
            st.from_regex(validator.pattern, fullmatch=True)
            .map(str.strip)
            .filter(lambda item: bool(item) and "," not in item and item == item.strip()),
            unique=True,
        ).map(tuple)
    text = st.text(st.characters(blacklist_characters=","), min_size=1).map(str.strip).filter(bool)
    if defn.type is ConfigType.LIST:
        return st.lists(text, min_size=1, unique=True).map(tuple)
    return text


@settings(deadline=None)  # a loaded 2-core CI machine: no example's time limit
@given(st.data())
def test_parse_of_format_is_identity(data: st.DataObject) -> None:
    defn = data.draw(st.sampled_from(CONFIG_DEFS))
    value = data.draw(_typed_values(defn))
    assert parse_value(defn, format_value(value), topic=True) == value


@given(st.sampled_from(CONFIG_DEFS), st.one_of(st.text(), st.integers(), st.floats(), st.booleans()))
def test_arbitrary_input_parses_or_raises_invalid_input(
    defn: ConfigDef, raw: str | int | float | bool
) -> None:
    try:
        parse_value(defn, raw)
    except InvalidInputError as exc:
        assert defn.name in str(exc)

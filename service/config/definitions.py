"""Every configuration key in one table: Kafka's ``ConfigDef`` in Python.

Each :class:`ConfigDef` row holds a broker key, its type, Kafka's default, the validator, a one-line doc,
the topic-level name it is the default for (Kafka's "synonym") and the lower-precedence broker keys it
falls back to (``log.retention.ms`` → ``.minutes`` → ``.hours``). Parsing, unknown-key warnings, topic
validation and each value's source (``default``, ``broker``, ``override`` …) derive from this table, so a
key is added or changed here and nowhere else.

Defaults are Kafka 3.x's (``segment.bytes`` down to 14 bytes; ``message.timestamp.after.max.ms``
unlimited). Validators are what Kafka enforces in effect: a broker value that Kafka would only reject
when it builds the topic's ``LogConfig`` (``log.roll.ms=0``) is rejected here, under the broker key.
"""

from __future__ import annotations

import enum
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from service.base.errors import InvalidInputError
from service.storage.log_config import LONG_MAX

__all__ = [
    "CONFIG_DEFS",
    "DEFS_BY_NAME",
    "DEFS_BY_TOPIC_NAME",
    "SPARK_PREFIX",
    "ConfigDef",
    "ConfigSource",
    "ConfigType",
    "ConfigValue",
    "InvalidConfigError",
    "Range",
    "RawValue",
    "ValidList",
    "ValidPattern",
    "ValidString",
    "Validator",
    "describe_allowed",
    "format_value",
    "parse_value",
]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN = -(1 << 63)
SPARK_PREFIX = "spark."
# log.cleaner.spark.min.bytes: the round size from which Spark may beat in-process (docs/cleaner.md: why)
SPARK_MIN_BYTES_DEFAULT = 16 << 30
# log.cleaner.spark.max.logs.per.job: how many logs one Spark job cleans together (docs/performance.md)
SPARK_MAX_LOGS_PER_JOB_DEFAULT = 8

ConfigValue = int | float | bool | str | tuple[str, ...]
"""A parsed value: INT/LONG → int, DOUBLE → float, BOOLEAN → bool, STRING → str, LIST → tuple."""
RawValue = str | int | float | bool
"""A value as it arrives: a string from a properties file, a string or a number from the API."""
ConfigSource = Literal[
    "default", "broker", "broker-dynamic", "internal-topic-default", "metadata", "override", "unknown"
]
"""Where an effective topic config value came from (``config_layers``: the order, highest last here)."""


class ConfigType(enum.Enum):
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    LIST = "LIST"


@dataclass(frozen=True, slots=True)
class Range:
    """Numbers in ``[min, max]``; ``None`` leaves that end open (Kafka ``Range.atLeast``/``between``)."""

    min: int | float | None = None
    max: int | float | None = None


@dataclass(frozen=True, slots=True)
class ValidString:
    """One of ``allowed``, case-sensitive as Kafka's ``ValidString.in``."""

    allowed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ValidList:
    """A non-empty list whose items are each one of ``allowed`` (Kafka ``ValidList.in``)."""

    allowed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ValidPattern:
    """A list (possibly empty) whose items each match ``pattern``, described to users as ``description``."""

    pattern: str
    description: str


Validator = Range | ValidString | ValidList | ValidPattern
_ORIGIN_PATTERN = r"https?://(?:\[[0-9a-fA-F:.]+\]|[^\s/:?#@\[\]]+)(?::[0-9]{1,5})?/?"


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One key. ``default=None`` means unset (the key falls back to its ``synonyms`` in order).

    ``topic_validator`` is set only where the topic key is stricter than the broker key: Kafka accepts
    any negative ``log.retention.ms`` (as unlimited) but only ``retention.ms >= -1``.
    """

    name: str
    type: ConfigType
    default: ConfigValue | None
    doc: str
    validator: Validator | None = None
    topic_name: str | None = None
    synonyms: tuple[str, ...] = ()
    topic_validator: Validator | None = None

    @property
    def attribute(self) -> str:
        """The Python attribute name: the key with ``.`` → ``_``."""
        return self.name.replace(".", "_")

    def validator_for(self, *, topic: bool) -> Validator | None:
        return self.topic_validator if topic and self.topic_validator is not None else self.validator


_I, _L, _D, _B, _S = ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE, ConfigType.BOOLEAN, ConfigType.STRING
_AT_LEAST_0, _AT_LEAST_1 = Range(0), Range(1)

# fmt: off
CONFIG_DEFS: tuple[ConfigDef, ...] = (
    ConfigDef("log.dirs", ConfigType.LIST, None, "Comma-separated log directories; wins over log.dir "
              "(with neither set, logcleaner uses ./data/logs)", synonyms=("log.dir",)),
    ConfigDef("log.dir", _S, "/tmp/kafka-logs", "The log directory, used when log.dirs is not set"),
    ConfigDef("log.segment.bytes", _I, 1_073_741_824, "Maximum size of a segment file",
              Range(14), "segment.bytes"),
    ConfigDef("log.roll.ms", _L, None, "Maximum age of a segment before a roll (wins over log.roll.hours)",
              _AT_LEAST_1, "segment.ms", ("log.roll.hours",)),
    ConfigDef("log.roll.hours", _I, 168, "Maximum age of a segment before a roll, in hours", _AT_LEAST_1),
    ConfigDef("log.roll.jitter.ms", _L, None, "Maximum random jitter subtracted from the roll time",
              _AT_LEAST_0, "segment.jitter.ms", ("log.roll.jitter.hours",)),
    ConfigDef("log.roll.jitter.hours", _I, 0, "Maximum roll jitter, in hours", _AT_LEAST_0),
    ConfigDef("log.retention.ms", _L, None, "Time to keep a segment; negative = unlimited (wins over "
              "minutes and hours)", None, "retention.ms", ("log.retention.minutes", "log.retention.hours"),
              Range(-1)),
    ConfigDef("log.retention.minutes", _I, None, "Time to keep a segment, in minutes (wins over hours)"),
    ConfigDef("log.retention.hours", _I, 168, "Time to keep a segment, in hours"),
    ConfigDef("log.retention.bytes", _L, -1, "Maximum size of a partition's log; negative = unlimited",
              None, "retention.bytes"),
    ConfigDef("log.retention.check.interval.ms", _L, 300_000, "Period of the retention task", _AT_LEAST_1),
    ConfigDef("log.cleanup.policy", ConfigType.LIST, ("delete",), "delete, compact, or both",
              ValidList(("compact", "delete")), "cleanup.policy"),
    ConfigDef("log.cleaner.enable", _B, True, "Run the log cleaner (false: no compaction and no "
              "retention for compacted logs)"),
    ConfigDef("log.cleaner.threads", _I, 1, "Number of cleaner threads", _AT_LEAST_0),
    ConfigDef("log.cleaner.min.cleanable.ratio", _D, 0.5, "Minimum dirty ratio for a log to be cleaned",
              Range(0.0, 1.0), "min.cleanable.dirty.ratio"),
    ConfigDef("log.cleaner.backoff.ms", _L, 15_000, "Sleep of an idle cleaner thread", _AT_LEAST_0),
    ConfigDef("log.cleaner.dedupe.buffer.size", _L, 134_217_728, "Offset map memory, all cleaner threads"),
    ConfigDef("log.cleaner.io.buffer.size", _I, 524_288, "I/O buffer memory over all cleaner threads",
              _AT_LEAST_0),
    ConfigDef("log.cleaner.io.buffer.load.factor", _D, 0.9, "Fill limit of the offset map"),
    ConfigDef("log.cleaner.io.max.bytes.per.second", _D, sys.float_info.max, "Cleaner I/O throttle"),
    ConfigDef("log.cleaner.delete.retention.ms", _L, 86_400_000, "How long tombstones and markers are kept",
              _AT_LEAST_0, "delete.retention.ms"),
    ConfigDef("log.cleaner.min.compaction.lag.ms", _L, 0, "Minimum age of a record before compaction",
              _AT_LEAST_0, "min.compaction.lag.ms"),
    ConfigDef("log.cleaner.max.compaction.lag.ms", _L, LONG_MAX, "Maximum age of an uncompacted record",
              _AT_LEAST_1, "max.compaction.lag.ms"),
    ConfigDef("log.message.timestamp.type", _S, "CreateTime", "Timestamp stored in appended batches",
              ValidString(("CreateTime", "LogAppendTime")), "message.timestamp.type"),
    ConfigDef("log.message.timestamp.before.max.ms", _L, LONG_MAX, "How far a timestamp may lie in the past",
              _AT_LEAST_0, "message.timestamp.before.max.ms"),
    ConfigDef("log.message.timestamp.after.max.ms", _L, LONG_MAX, "How far a timestamp may lie in the "
              "future", _AT_LEAST_0, "message.timestamp.after.max.ms"),
    ConfigDef("log.flush.interval.messages", _L, LONG_MAX, "Messages appended before a flush", _AT_LEAST_1,
              "flush.messages"),
    ConfigDef("log.flush.interval.ms", _L, None, "Maximum time between flushes (falls back to "
              "log.flush.scheduler.interval.ms)", _AT_LEAST_0, "flush.ms",
              ("log.flush.scheduler.interval.ms",)),
    ConfigDef("log.flush.scheduler.interval.ms", _L, LONG_MAX, "Period of the flusher task", _AT_LEAST_0),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", _I, 60_000, "Period of the recovery-point "
              "checkpoint task", _AT_LEAST_0),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", _I, 60_000, "Period of the log-start-offset "
              "checkpoint task", _AT_LEAST_0),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", _L, 5000, "Period of the high-watermark "
              "checkpoint task (replication-offset-checkpoint); 0 or less: once, then at shutdown"),
    ConfigDef("log.index.interval.bytes", _I, 4096, "Bytes appended between offset index entries",
              _AT_LEAST_0, "index.interval.bytes"),
    ConfigDef("log.index.size.max.bytes", _I, 10_485_760, "Maximum size of an index file", Range(4),
              "segment.index.bytes"),
    ConfigDef("log.segment.delete.delay.ms", _L, 60_000, "Wait before a .deleted file is removed",
              _AT_LEAST_0, "file.delete.delay.ms"),
    ConfigDef("producer.id.expiration.ms", _I, 86_400_000, "Idle time after which a producer id without an "
              "open transaction is forgotten", _AT_LEAST_1),
    ConfigDef("producer.id.expiration.check.interval.ms", _I, 600_000, "Period of the producer-expiry "
              "task", _AT_LEAST_1),
    ConfigDef("log.preallocate", _B, False, "Create segment files at full size", None, "preallocate"),
    ConfigDef("num.recovery.threads.per.data.dir", _I, 1, "Threads per log dir for loading and recovery",
              _AT_LEAST_1),
    ConfigDef("num.partitions", _I, 1, "Default partition count of a new topic", _AT_LEAST_1),
    ConfigDef("message.max.bytes", _I, 1_048_588, "Largest record batch accepted", _AT_LEAST_0,
              "max.message.bytes"),
    ConfigDef("api.host", _S, "127.0.0.1", "Address the REST API listens on"),
    ConfigDef("api.port", _I, 8080, "Port the REST API listens on (0 = any free port)", Range(0, 65535)),
    ConfigDef("api.auth.token.file", _S, None, "File holding the API bearer token (unset = no auth)"),
    ConfigDef("api.auth.allow.anonymous", _B, False, "Serve without api.auth.token.file on an address "
              "beyond loopback (ours)"),
    ConfigDef("api.allowed.hosts", ConfigType.LIST, (), "Host names accepted in the Host header besides "
              "the bound address and localhost; * accepts any (ours)"),
    ConfigDef("api.allowed.origins", ConfigType.LIST, (), "Cross-site origins (scheme://host[:port]) whose "
              "browser requests are accepted (ours)",
              ValidPattern(_ORIGIN_PATTERN, "origins scheme://host[:port] (http or https)")),
    ConfigDef("api.max.request.bytes", _I, 10_485_760, "Largest REST request body accepted (413 above)",
              _AT_LEAST_1),
    ConfigDef("api.max.records.per.request", _I, 10_000, "Most records in one REST produce request (422 "
              "above)", _AT_LEAST_1),
    ConfigDef("api.max.fetch.records", _I, 10_000, "Largest max_records of a REST fetch (422 above)",
              _AT_LEAST_1),
    ConfigDef("api.max.fetch.bytes", _I, 52_428_800, "Record bytes after which a REST fetch stops (at least "
              "one record is returned)", _AT_LEAST_1),
    ConfigDef("shutdown.timeout.ms", _L, 30_000, "Longest a stop may take; past it the process exits 1 "
              "without the clean-shutdown marker", _AT_LEAST_0),
    ConfigDef("scheduler.initial.delay.ms", _L, 30_000, "Delay before the first run of each scheduled task",
              _AT_LEAST_0),
    ConfigDef("log.cleaner.engine", _S, "auto", "Where compaction runs: auto (by the round's bytes), on "
              "Spark, or in-process (ours)", ValidString(("auto", "spark", "in-process"))),
    ConfigDef("log.cleaner.spark.min.bytes", _L, SPARK_MIN_BYTES_DEFAULT, "With engine auto, the bytes a "
              "round reads from which it runs on Spark (ours)", _AT_LEAST_0),
    ConfigDef("log.cleaner.spark.max.logs.per.job", _I, SPARK_MAX_LOGS_PER_JOB_DEFAULT, "How many logs whose "
              "rounds go to Spark one Spark job may clean together (ours)", _AT_LEAST_1),
    ConfigDef("log.cleaner.uncleanable.retry.backoff.ms", _L, 600_000, "Wait before an uncleanable partition "
              "is tried again, doubling per failed attempt up to an hour; -1: never, until restart as in "
              "Kafka (ours)", Range(-1)),
    ConfigDef("log.cleaner.spill.dir", _S, None, "Where a round's key map spills beyond its thread's share "
              "of log.cleaner.dedupe.buffer.size (unset: the partition's own dir; ours)"),
    ConfigDef("offsets.topic.segment.bytes", _I, 104_857_600, "segment.bytes of __consumer_offsets when "
              "nothing else sets it (Kafka creates the topic with it)", _AT_LEAST_1),
    ConfigDef("transaction.state.log.segment.bytes", _I, 104_857_600, "segment.bytes of __transaction_state "
              "when nothing else sets it (Kafka creates the topic with it)", _AT_LEAST_1),
    ConfigDef("metadata.log.dir", _S, None, "Where the KRaft metadata log __cluster_metadata-0 is (unset: "
              "the first of log.dirs); read, never written"),
    ConfigDef("metadata.log.ignore", _B, False, "Do not read the KRaft metadata log: every topic falls under "
              "logcleaner's overrides and the broker config (ours)"),
    ConfigDef("unknown.topic.configs", _S, "hold", "On a broker's dir whose metadata log is not found (a "
              "ZooKeeper-era copy), topics without an override: hold (retention and the cleaner leave them "
              "alone until their configs are imported or set) or broker-defaults (ours)",
              ValidString(("hold", "broker-defaults"))),
    ConfigDef("spark.master", _S, "local[*]", "Spark master URL; other spark.* keys pass to Spark as is"),
)
# fmt: on

DEFS_BY_NAME: Mapping[str, ConfigDef] = {d.name: d for d in CONFIG_DEFS}
DEFS_BY_TOPIC_NAME: Mapping[str, ConfigDef] = {d.topic_name: d for d in CONFIG_DEFS if d.topic_name}

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_TYPE_BOUNDS = {ConfigType.INT: (INT_MIN, INT_MAX), ConfigType.LONG: (LONG_MIN, LONG_MAX)}
_LONG_DIGITS = len(str(LONG_MAX))
_SHOWN_MAX_BITS = 256
_SHOWN_MAX_CHARS = 80


class InvalidConfigError(InvalidInputError):
    """A config value or name that is not allowed; ``name`` and ``value`` say which.

    Fix: change the value in the config file, the ``--override`` or the request to one of ``allowed``.
    """

    def __init__(self, message: str, *, name: str, value: object) -> None:
        super().__init__(message)
        self.name = name
        self.value = value


def describe_allowed(defn: ConfigDef, *, topic: bool = False) -> str:
    """What the key accepts, in words, for error messages and docs."""
    validator = defn.validator_for(topic=topic)
    if isinstance(validator, ValidString):
        return "one of " + ", ".join(validator.allowed)
    if isinstance(validator, ValidList):
        return "a non-empty comma-separated list of " + ", ".join(validator.allowed)
    if isinstance(validator, ValidPattern):
        return "a comma-separated list of " + validator.description
    if defn.type in _TYPE_BOUNDS:
        low, high = _TYPE_BOUNDS[defn.type]
        if isinstance(validator, Range):
            low = int(validator.min) if validator.min is not None else low
            high = int(validator.max) if validator.max is not None else high
        return f"an integer in [{low}, {high}]"
    if defn.type is ConfigType.DOUBLE:
        if isinstance(validator, Range) and validator.min is not None and validator.max is not None:
            return f"a number in [{validator.min}, {validator.max}]"
        return "a finite number"
    if defn.type is ConfigType.BOOLEAN:
        return "true or false"
    return "a string"


def parse_value(defn: ConfigDef, raw: RawValue, *, topic: bool = False) -> ConfigValue:
    """Parse and validate ``raw`` as Kafka's ``ConfigDef.parseType`` + validator would.

    Strings are trimmed; numbers may arrive as JSON numbers. ``topic=True`` names the topic key in errors
    and applies the topic validator. Raises :class:`InvalidConfigError` naming key, value and what is allowed.
    """
    name = defn.topic_name if topic and defn.topic_name else defn.name
    value = _parse_type(defn.type, raw)
    if value is not None:
        problem = _check(defn.validator_for(topic=topic), value)
    elif defn.type in _TYPE_BOUNDS and _is_integer(raw):
        problem = f"out of the range of Kafka's {defn.type.value} type"
    else:
        problem = f"not a {_TYPE_WORDS[defn.type]}"
    if problem is None and value is not None:
        return value
    shown = _shown(raw)
    allowed = describe_allowed(defn, topic=topic)
    raise InvalidConfigError(
        f"Invalid value {shown} for configuration {name}: {problem}; allowed: {allowed}",
        name=name,
        value=raw,
    )


def format_value(value: ConfigValue) -> str:
    """The Kafka string form of a parsed value; ``parse_value`` reads it back unchanged."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return repr(value) if isinstance(value, float) else str(value)


_TYPE_WORDS = {
    ConfigType.INT: "number of type INT",
    ConfigType.LONG: "number of type LONG",
    ConfigType.DOUBLE: "finite number of type DOUBLE",
    ConfigType.BOOLEAN: "boolean (true or false)",
    ConfigType.STRING: "string",
    ConfigType.LIST: "comma-separated list",
}


def _is_integer(raw: RawValue) -> bool:
    if isinstance(raw, bool):
        return False
    return isinstance(raw, int) or (isinstance(raw, str) and _INTEGER.fullmatch(raw.strip()) is not None)


def _shown(raw: RawValue) -> str:
    """``raw`` for a message: strings quoted, booleans as Kafka writes them, huge numbers abridged (Python
    refuses to print an int of over 4300 digits, and a message of thousands of digits helps no one)."""
    if isinstance(raw, bool):
        return str(raw).lower()
    if isinstance(raw, int):
        if raw.bit_length() <= _SHOWN_MAX_BITS:
            return str(raw)
        return f"<an integer of about {int(raw.bit_length() * math.log10(2)) + 1} digits>"
    if not isinstance(raw, str):
        return str(raw)
    text = repr(raw)
    return text if len(text) <= _SHOWN_MAX_CHARS else f"{text[:_SHOWN_MAX_CHARS]}... ({len(raw)} characters)"


def _parse_type(config_type: ConfigType, raw: RawValue) -> ConfigValue | None:
    """The typed value, or ``None`` when ``raw`` is not of ``config_type`` or out of its range."""
    if config_type in _TYPE_BOUNDS:
        number: int | None = None
        if isinstance(raw, int) and not isinstance(raw, bool):
            number = raw
        elif isinstance(raw, str) and _INTEGER.fullmatch(raw.strip()):
            text = raw.strip()
            digits = text.lstrip("+-").lstrip("0") or "0"
            # Past 19 digits it is out of any Kafka range; int() would refuse past 4300 characters anyway.
            number = (
                int(text[0] + digits if text[0] in "+-" else digits) if len(digits) <= _LONG_DIGITS else None
            )
        low, high = _TYPE_BOUNDS[config_type]
        return number if number is not None and low <= number <= high else None
    if config_type is ConfigType.DOUBLE:
        real: float | None = None
        try:
            if isinstance(raw, (int, float)) and not isinstance(raw, bool):
                real = float(raw)
            elif isinstance(raw, str) and _DECIMAL.fullmatch(raw.strip()):
                real = float(raw.strip())
        except OverflowError:  # an int beyond the largest float
            real = None
        return real if real is not None and math.isfinite(real) else None
    if config_type is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        text = raw.strip().lower() if isinstance(raw, str) else ""
        return {"true": True, "false": False}.get(text)
    if not isinstance(raw, str):
        return None
    if config_type is ConfigType.LIST:  # Kafka's csvList: split on commas, trim, drop empty items
        items = (item.strip() for item in raw.split(","))
        return tuple(dict.fromkeys(item for item in items if item))
    return raw.strip()


def _check(validator: Validator | None, value: ConfigValue) -> str | None:
    """Why ``value`` breaks ``validator`` (Kafka's wording), or ``None`` if it does not."""
    if isinstance(validator, Range) and isinstance(value, (int, float)):
        if validator.min is not None and value < validator.min:
            return f"value must be at least {validator.min}"
        if validator.max is not None and value > validator.max:
            return f"value must be no more than {validator.max}"
    elif isinstance(validator, ValidString) and value not in validator.allowed:
        return "not an allowed value (names are case-sensitive)"
    elif isinstance(validator, ValidList) and isinstance(value, tuple):
        if not value:
            return "the list must not be empty"
        unknown = [item for item in value if item not in validator.allowed]
        if unknown:
            return f"{unknown[0]!r} is not an allowed item"
    elif isinstance(validator, ValidPattern) and isinstance(value, tuple):
        wrong = [item for item in value if not re.fullmatch(validator.pattern, item)]
        if wrong:
            return f"{wrong[0]!r} is not one of the {validator.description}"
    return None

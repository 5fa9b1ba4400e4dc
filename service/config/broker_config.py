"""The broker (service-wide) configuration: ``server.properties`` + ``--override``, parsed once at start-up.

Built in the composition root and passed down as narrow values; never a global. Every key is declared
once, as a field of ``BrokerConfig`` (``.`` → ``_``), its row of :data:`CONFIG_DEFS` beside it. Keys with
synonyms hold the *resolved* value, as Kafka's ``KafkaConfig`` accessors do:

- ``log_retention_ms``: ``log.retention.ms``, else ``.minutes`` × 60,000, else ``.hours`` × 3,600,000;
  any negative result is ``-1`` (unlimited).
- ``log_roll_ms`` / ``log_roll_jitter_ms``: the ``.ms`` key, else the ``.hours`` key × 3,600,000.
- ``log_flush_interval_ms``: ``log.flush.interval.ms``, else ``log.flush.scheduler.interval.ms``.
- ``log_dirs``: ``log.dirs``, else ``log.dir`` if set, else ``./data/logs`` (the contract's embedded
  default; Kafka's own would be ``/tmp/kafka-logs``).

One field is no key: ``log_dir_paths``, the log dirs resolved once, at parse (absolute, ``..`` and
symbolic links resolved, as Kafka's ``getCanonicalPath``). Every part of the service names a log dir by it,
so a lock, a prescan and a load of the same dir always agree on its path; two entries that resolve to the
same dir are refused (Kafka's "Duplicate log directory found").
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from service.config.definitions import (
    SPARK_MAX_LOGS_PER_JOB_DEFAULT,
    SPARK_MIN_BYTES_DEFAULT,
    SPARK_PREFIX,
    ConfigDef,
    ConfigSource,
    ConfigType,
    ConfigValue,
    InvalidConfigError,
    Range,
    Validator,
    ValidList,
    ValidPattern,
    ValidString,
    parse_value,
)
from service.config.kafka_broker_keys import KAFKA_BROKER_KEYS
from service.config.properties import parse_overrides, read_properties_checked
from service.storage.log_config import LONG_MAX

__all__ = [
    "CONFIG_DEFS",
    "DEFS_BY_NAME",
    "DEFS_BY_TOPIC_NAME",
    "EMBEDDED_LOG_DIRS",
    "BrokerConfig",
    "load_broker_config",
]

EMBEDDED_LOG_DIRS = ("./data/logs",)
_MS_PER_UNIT = {"ms": 1, "minutes": 60_000, "hours": 3_600_000}
_ORIGIN_PATTERN = r"https?://(?:\[[0-9a-fA-F:.]+\]|[^\s/:?#@\[\]]+)(?::[0-9]{1,5})?/?"


_ROW = "config_def"  # the metadata entry of a key's field that holds its row


def _key(
    type_: ConfigType,
    default: ConfigValue | None,
    doc: str,
    validator: Validator | None = None,
    topic_name: str | None = None,
    synonyms: tuple[str, ...] = (),
    topic_validator: Validator | None = None,
) -> Any:  # a dataclass field: its type is the annotation beside it
    """A configuration key's row, as the metadata of the ``BrokerConfig`` field that holds its value."""
    row = ConfigDef("", type_, default, doc, validator, topic_name, synonyms, topic_validator)
    return field(metadata={_ROW: row})


_I, _L, _D, _B, _S = ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE, ConfigType.BOOLEAN, ConfigType.STRING
_AT_LEAST_0, _AT_LEAST_1 = Range(0), Range(1)


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Typed broker settings; build with :meth:`from_properties` or :func:`load_broker_config`.

    Every configuration key is declared once, here, as the field of its name (``.`` → ``_``): its Python type,
    then its row of Kafka's ``ConfigDef`` (``_key``: the key's type, Kafka's default, the doc, the validator,
    the topic-level name it is the default for and the lower-precedence keys it falls back to). Parsing,
    unknown-key warnings, topic validation and each value's source derive from :data:`CONFIG_DEFS`, the rows
    read back from the fields, so a key is added or changed here and nowhere else. Defaults are Kafka 3.x's
    (``segment.bytes`` down to 14 bytes; ``message.timestamp.after.max.ms`` unlimited); validators are what
    Kafka enforces in effect (a broker value Kafka would only reject when it builds a topic's ``LogConfig``,
    ``log.roll.ms=0``, is rejected here, under the broker key). "(ours)" marks logcleaner's own keys.
    """

    # Three fields are no key (declared first: mypy takes a key's field for one with a default).
    log_dir_paths: tuple[Path, ...]
    """``log_dirs`` resolved (see the module docstring): what the service opens."""
    spark_conf: Mapping[str, str]
    """Every ``spark.*`` key to hand to Spark, ``spark.master`` included (with its default)."""
    explicit_keys: frozenset[str]
    """The keys set in the file or by ``--override`` (the ``broker`` source); the rest are defaults."""

    # fmt: off
    log_dirs: tuple[str, ...] = _key(
        ConfigType.LIST, None, "Comma-separated log directories; wins over log.dir "
        "(with neither set, logcleaner uses ./data/logs)", synonyms=("log.dir",))
    log_dir: str = _key(_S, "/tmp/kafka-logs", "The log directory, used when log.dirs is not set")
    log_segment_bytes: int = _key(_I, 1_073_741_824, "Maximum size of a segment file",
        Range(14), "segment.bytes")
    log_roll_ms: int = _key(_L, None, "Maximum age of a segment before a roll (wins over log.roll.hours)",
        _AT_LEAST_1, "segment.ms", ("log.roll.hours",))
    log_roll_hours: int = _key(_I, 168, "Maximum age of a segment before a roll, in hours", _AT_LEAST_1)
    log_roll_jitter_ms: int = _key(_L, None, "Maximum random jitter subtracted from the roll time",
        _AT_LEAST_0, "segment.jitter.ms", ("log.roll.jitter.hours",))
    log_roll_jitter_hours: int = _key(_I, 0, "Maximum roll jitter, in hours", _AT_LEAST_0)
    log_retention_ms: int = _key(_L, None, "Time to keep a segment; negative = unlimited (wins over "
        "minutes and hours)", None, "retention.ms", ("log.retention.minutes", "log.retention.hours"),
        Range(-1))
    log_retention_minutes: int | None = _key(_I, None, "Time to keep a segment, in minutes (wins over hours)")
    log_retention_hours: int = _key(_I, 168, "Time to keep a segment, in hours")
    log_retention_bytes: int = _key(_L, -1, "Maximum size of a partition's log; negative = unlimited",
        None, "retention.bytes")
    log_retention_check_interval_ms: int = _key(_L, 300_000, "Period of the retention task", _AT_LEAST_1)
    log_cleanup_policy: tuple[str, ...] = _key(ConfigType.LIST, ("delete",), "delete, compact, or both",
        ValidList(("compact", "delete")), "cleanup.policy")
    log_cleaner_enable: bool = _key(_B, True, "Run the log cleaner (false: no compaction and no "
        "retention for compacted logs)")
    log_cleaner_threads: int = _key(_I, 1, "Number of cleaner threads", _AT_LEAST_0)
    log_cleaner_min_cleanable_ratio: float = _key(_D, 0.5, "Minimum dirty ratio for a log to be cleaned",
        Range(0.0, 1.0), "min.cleanable.dirty.ratio")
    log_cleaner_backoff_ms: int = _key(_L, 15_000, "Sleep of an idle cleaner thread", _AT_LEAST_0)
    log_cleaner_dedupe_buffer_size: int = _key(_L, 134_217_728, "Offset map memory, all cleaner threads")
    log_cleaner_io_buffer_size: int = _key(_I, 524_288, "I/O buffer memory over all cleaner threads",
        _AT_LEAST_0)
    log_cleaner_io_buffer_load_factor: float = _key(_D, 0.9, "Fill limit of the offset map")
    log_cleaner_io_max_bytes_per_second: float = _key(_D, sys.float_info.max, "Cleaner I/O throttle")
    log_cleaner_delete_retention_ms: int = _key(_L, 86_400_000, "How long tombstones and markers are kept",
        _AT_LEAST_0, "delete.retention.ms")
    log_cleaner_min_compaction_lag_ms: int = _key(_L, 0, "Minimum age of a record before compaction",
        _AT_LEAST_0, "min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms: int = _key(_L, LONG_MAX, "Maximum age of an uncompacted record",
        _AT_LEAST_1, "max.compaction.lag.ms")
    log_message_timestamp_type: str = _key(_S, "CreateTime", "Timestamp stored in appended batches",
        ValidString(("CreateTime", "LogAppendTime")), "message.timestamp.type")
    log_message_timestamp_before_max_ms: int = _key(_L, LONG_MAX, "How far a timestamp may lie in the past",
        _AT_LEAST_0, "message.timestamp.before.max.ms")
    log_message_timestamp_after_max_ms: int = _key(_L, LONG_MAX, "How far a timestamp may lie in the "
        "future", _AT_LEAST_0, "message.timestamp.after.max.ms")
    log_flush_interval_messages: int = _key(_L, LONG_MAX, "Messages appended before a flush", _AT_LEAST_1,
        "flush.messages")
    log_flush_interval_ms: int = _key(_L, None, "Maximum time between flushes (falls back to "
        "log.flush.scheduler.interval.ms)", _AT_LEAST_0, "flush.ms",
        ("log.flush.scheduler.interval.ms",))
    log_flush_scheduler_interval_ms: int = _key(_L, LONG_MAX, "Period of the flusher task", _AT_LEAST_0)
    log_flush_offset_checkpoint_interval_ms: int = _key(_I, 60_000, "Period of the recovery-point "
        "checkpoint task", _AT_LEAST_0)
    log_flush_start_offset_checkpoint_interval_ms: int = _key(_I, 60_000, "Period of the log-start-offset "
        "checkpoint task", _AT_LEAST_0)
    replica_high_watermark_checkpoint_interval_ms: int = _key(_L, 5000, "Period of the high-watermark "
        "checkpoint task (replication-offset-checkpoint); 0 or less: once, then at shutdown")
    log_index_interval_bytes: int = _key(_I, 4096, "Bytes appended between offset index entries",
        _AT_LEAST_0, "index.interval.bytes")
    log_index_size_max_bytes: int = _key(_I, 10_485_760, "Maximum size of an index file", Range(4),
        "segment.index.bytes")
    log_segment_delete_delay_ms: int = _key(_L, 60_000, "Wait before a .deleted file is removed",
        _AT_LEAST_0, "file.delete.delay.ms")
    producer_id_expiration_ms: int = _key(_I, 86_400_000, "Idle time after which a producer id without an "
        "open transaction is forgotten", _AT_LEAST_1)
    producer_id_expiration_check_interval_ms: int = _key(_I, 600_000, "Period of the producer-expiry "
        "task", _AT_LEAST_1)
    log_preallocate: bool = _key(_B, False, "Create segment files at full size", None, "preallocate")
    num_recovery_threads_per_data_dir: int = _key(_I, 1, "Threads per log dir that close its logs at a "
        "stop (the load runs on one: operations.md)", _AT_LEAST_1)
    num_partitions: int = _key(_I, 1, "Default partition count of a new topic", _AT_LEAST_1)
    message_max_bytes: int = _key(_I, 1_048_588, "Largest record batch accepted", _AT_LEAST_0,
        "max.message.bytes")
    api_host: str = _key(_S, "127.0.0.1", "Address the REST API listens on")
    api_port: int = _key(_I, 8080, "Port the REST API listens on (0 = any free port)", Range(0, 65535))
    api_auth_token_file: str | None = _key(_S, None, "File holding the API bearer token (unset = no auth)")
    api_auth_allow_anonymous: bool = _key(_B, False, "Serve without api.auth.token.file on an address "
        "beyond loopback (ours)")
    api_allowed_hosts: tuple[str, ...] = _key(
        ConfigType.LIST, (), "Host names accepted in the Host header besides "
        "the bound address and localhost; * accepts any (ours)")
    api_allowed_origins: tuple[str, ...] = _key(
        ConfigType.LIST, (), "Cross-site origins (scheme://host[:port]) whose "
        "browser requests are accepted (ours)",
        ValidPattern(_ORIGIN_PATTERN, "origins scheme://host[:port] (http or https)"))
    api_max_request_bytes: int = _key(_I, 10_485_760, "Largest REST request body accepted (413 above)",
        _AT_LEAST_1)
    api_max_records_per_request: int = _key(_I, 10_000, "Most records in one REST produce request (422 "
        "above)", _AT_LEAST_1)
    api_max_fetch_records: int = _key(_I, 10_000, "Largest max_records of a REST fetch (422 above)",
        _AT_LEAST_1)
    api_max_fetch_bytes: int = _key(_I, 52_428_800, "Record bytes after which a REST fetch stops (at least "
        "one record is returned)", _AT_LEAST_1)
    shutdown_timeout_ms: int = _key(_L, 30_000, "Longest a stop may take; past it the process exits 1 "
        "without the clean-shutdown marker", _AT_LEAST_0)
    scheduler_initial_delay_ms: int = _key(_L, 30_000, "Delay before the first run of each scheduled task",
        _AT_LEAST_0)
    log_cleaner_engine: str = _key(_S, "auto", "Where compaction runs: auto (by the round's bytes), on "
        "Spark, or in-process (ours)", ValidString(("auto", "spark", "in-process")))
    log_cleaner_spark_min_bytes: int = _key(_L, SPARK_MIN_BYTES_DEFAULT, "With engine auto, the bytes a "
        "round reads from which it runs on Spark (ours)", _AT_LEAST_0)
    log_cleaner_spark_max_logs_per_job: int = _key(_I, SPARK_MAX_LOGS_PER_JOB_DEFAULT, "How many logs whose "
        "rounds go to Spark one Spark job may clean together (ours)", _AT_LEAST_1)
    log_cleaner_uncleanable_retry_backoff_ms: int = _key(_L, 600_000, "Wait before an uncleanable partition "
        "is tried again, doubling per failed attempt up to an hour; -1: never, until restart as in "
        "Kafka (ours)", Range(-1))
    log_cleaner_spill_dir: str | None = _key(
        _S, None, "Where a round's key map spills beyond its thread's share "
        "of log.cleaner.dedupe.buffer.size (unset: the partition's own dir; ours)")
    offsets_topic_segment_bytes: int = _key(_I, 104_857_600, "segment.bytes of __consumer_offsets when "
        "nothing else sets it (Kafka creates the topic with it)", _AT_LEAST_1)
    transaction_state_log_segment_bytes: int = _key(_I, 104_857_600, "segment.bytes of __transaction_state "
        "when nothing else sets it (Kafka creates the topic with it)", _AT_LEAST_1)
    metadata_log_dir: str | None = _key(
        _S, None, "Where the KRaft metadata log __cluster_metadata-0 is (unset: "
        "the first of log.dirs); read, never written")
    metadata_log_ignore: bool = _key(_B, False, "Do not read the KRaft metadata log: every topic falls under "
        "logcleaner's overrides and the broker config (ours)")
    unknown_topic_configs: str = _key(_S, "hold", "On a broker's dir whose metadata log is not found (a "
        "ZooKeeper-era copy), topics without an override: hold (retention and the cleaner leave them "
        "alone until their configs are imported or set) or broker-defaults (ours)",
        ValidString(("hold", "broker-defaults")))
    spark_master: str = _key(_S, "local[*]", "Spark master URL; other spark.* keys pass to Spark as is")
    # fmt: on
    ignored_broker_keys: tuple[str, ...] = ()
    """Kafka broker keys set in the file that logcleaner does not use (``listeners``, ...), read quietly."""

    @classmethod
    def defaults(cls) -> BrokerConfig:
        """The configuration with nothing set: Kafka's defaults and the embedded ``./data/logs``."""
        return cls.from_properties({})[0]

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> tuple[BrokerConfig, list[str]]:
        """Parse ``props``: the config and one warning per unknown key. An invalid value raises
        :class:`~service.config.definitions.InvalidConfigError` (an ``InvalidInputError``) naming the key, the
        value and what is allowed. Every row of the table (``CONFIG_DEFS``) gives the field of its attribute
        name, read as its type and synonyms say."""
        explicit, spark, warnings, ignored = _split_properties(props)
        values = _Values(explicit)
        log_dirs = _resolve_log_dirs(explicit)
        table = {d.attribute: values.typed(d) for d in CONFIG_DEFS if d.name != "log.dirs"}
        return cls(
            log_dirs=log_dirs,
            log_dir_paths=_log_dir_paths(log_dirs, "log.dirs" if "log.dirs" in explicit else "log.dir"),
            spark_conf=MappingProxyType({"spark.master": values.text("spark.master"), **spark}),
            explicit_keys=frozenset(explicit) | frozenset(spark),
            ignored_broker_keys=ignored,
            **table,  # type: ignore[arg-type]  # each value checked against its row's type by _Values.typed
        ), warnings

    def source_of(self, key: str) -> ConfigSource:
        """``"broker"`` if ``key`` or a synonym it resolves from was set explicitly, else ``"default"``."""
        defn = DEFS_BY_NAME.get(key)
        if defn is None and not key.startswith(SPARK_PREFIX):
            raise KeyError(key)
        keys = (key, *defn.synonyms) if defn is not None else (key,)
        return "broker" if any(k in self.explicit_keys for k in keys) else "default"

    @property
    def metadata_log_path(self) -> Path:
        """The dir holding the KRaft metadata log: ``metadata.log.dir``, else the first of ``log.dirs``."""
        return Path(self.metadata_log_dir).resolve() if self.metadata_log_dir else self.log_dir_paths[0]

    def broker_value(self, key: str) -> ConfigValue | None:
        """The typed (for synonyms: resolved) value of broker ``key``; ``None`` if unset without default."""
        if key in DEFS_BY_NAME:
            value: ConfigValue | None = getattr(self, DEFS_BY_NAME[key].attribute)
            return value
        if key.startswith(SPARK_PREFIX):
            return self.spark_conf.get(key)
        raise KeyError(key)


def _rows() -> tuple[ConfigDef, ...]:
    """Each key's row, named after its field, in declaration order."""
    return tuple(
        replace(f.metadata[_ROW], name=f.name.replace("_", "."))
        for f in fields(BrokerConfig)
        if _ROW in f.metadata
    )


CONFIG_DEFS: tuple[ConfigDef, ...] = _rows()
DEFS_BY_NAME: Mapping[str, ConfigDef] = {d.name: d for d in CONFIG_DEFS}
DEFS_BY_TOPIC_NAME: Mapping[str, ConfigDef] = {d.topic_name: d for d in CONFIG_DEFS if d.topic_name}


def load_broker_config(config_file: Path | None, overrides: Sequence[str]) -> tuple[BrokerConfig, list[str]]:
    """Read ``config_file`` (``None``: embedded defaults) and apply ``--override key=value`` pairs on top."""
    props, file_warnings = read_properties_checked(config_file)
    props.update(parse_overrides(overrides))
    broker, warnings = BrokerConfig.from_properties(props)
    return broker, file_warnings + warnings


_PER_LISTENER_PREFIX = "listener.name."
_KNOWN_KEYS = sorted(set(DEFS_BY_NAME) | KAFKA_BROKER_KEYS)  # a typo of either is suggested
_SUGGESTION_CUTOFF = 0.85  # a typo of a known key ("hourz"), not another broker setting ("listeners")


def _split_properties(
    props: Mapping[str, str],
) -> tuple[dict[str, ConfigValue], dict[str, str], list[str], tuple[str, ...]]:
    """Sort ``props`` into the known keys (parsed: the first invalid value stops the parse), the ``spark.*``
    keys handed to Spark as they are, one warning per key neither logcleaner nor Kafka knows (not an error),
    and the Kafka broker keys logcleaner does not use (a broker's own file holds many: read quietly)."""
    explicit: dict[str, ConfigValue] = {}
    spark: dict[str, str] = {}
    warnings: list[str] = []
    ignored: list[str] = []
    for key, raw in props.items():
        defn = DEFS_BY_NAME.get(key)
        if defn is not None:
            explicit[key] = parse_value(defn, raw)
        elif key.startswith(SPARK_PREFIX):
            spark[key] = raw.strip()
        elif _is_kafka_broker_key(key):
            ignored.append(key)
        else:
            warnings.append(_unknown_key_warning(key))
    return explicit, spark, warnings, tuple(sorted(ignored))


def _is_kafka_broker_key(key: str) -> bool:
    """A broker config of the Kafka releases tested, or a per-listener one (``listener.name.<l>.<key>``)."""
    return key in KAFKA_BROKER_KEYS or key.startswith(_PER_LISTENER_PREFIX)


def _unknown_key_warning(key: str) -> str:
    """Kafka's tolerance of unknown keys, with the closest known key when one looks like a typo of it."""
    topic_defn = DEFS_BY_TOPIC_NAME.get(key)
    if topic_defn is not None:
        return (
            f"unknown config key {key!r} ignored: it is a topic config; the broker key is {topic_defn.name!r}"
        )
    close = difflib.get_close_matches(key, _KNOWN_KEYS, n=1, cutoff=_SUGGESTION_CUTOFF)
    return f"unknown config key {key!r} ignored" + (f": did you mean {close[0]}?" if close else "")


def _resolve_log_dirs(explicit: Mapping[str, ConfigValue]) -> tuple[str, ...]:
    if "log.dirs" in explicit:
        key, raw = "log.dirs", explicit["log.dirs"]
        dirs = raw if isinstance(raw, tuple) else ()
    elif "log.dir" in explicit:
        key, raw = "log.dir", explicit["log.dir"]
        dirs = tuple(d.strip() for d in str(raw).split(",") if d.strip())
    else:
        return EMBEDDED_LOG_DIRS
    if not dirs:
        raise InvalidConfigError(
            f"Invalid value '' for configuration {key}: no log directory; "
            "allowed: a comma-separated list of one or more directories",
            name=key,
            value="",
        )
    return dirs


def _log_dir_paths(log_dirs: tuple[str, ...], key: str) -> tuple[Path, ...]:
    """Each log dir resolved against the working directory; the same dir named twice is refused."""
    paths: dict[Path, str] = {}
    for configured in log_dirs:
        try:
            path = Path(configured).resolve()
        except (OSError, RuntimeError) as exc:  # RuntimeError: a symbolic link loop
            raise InvalidConfigError(
                f"Invalid value '{configured}' for configuration {key}: cannot resolve the path ({exc}); "
                "allowed: a directory path",
                name=key,
                value=configured,
            ) from exc
        if path in paths:
            raise InvalidConfigError(
                f"Invalid value '{','.join(log_dirs)}' for configuration {key}: Duplicate log directory "
                f"found: '{paths[path]}' and '{configured}' are both {path}; allowed: each directory once",
                name=key,
                value=",".join(log_dirs),
            )
        paths[path] = configured
    return tuple(paths)


_PYTHON_TYPES: Mapping[ConfigType, type] = {
    ConfigType.INT: int,
    ConfigType.LONG: int,
    ConfigType.DOUBLE: float,
    ConfigType.BOOLEAN: bool,
    ConfigType.STRING: str,
    ConfigType.LIST: tuple,
}


class _Values:
    """Typed access to explicit values with table defaults; the type checks guard against table typos."""

    def __init__(self, explicit: Mapping[str, ConfigValue]) -> None:
        self._explicit = explicit

    def get(self, key: str) -> ConfigValue | None:
        return self._explicit[key] if key in self._explicit else DEFS_BY_NAME[key].default

    def typed(self, defn: ConfigDef) -> ConfigValue | None:
        """The value of one row, of the Python type its ``ConfigType`` gives (None only where the row has no
        default); a time key with unit synonyms (``log.retention.ms`` → ``.minutes`` → ``.hours``) is
        resolved through them, in milliseconds."""
        if defn.synonyms and defn.name.endswith(".ms"):
            ms = self.ms(defn.name)
            return max(ms, -1) if defn.name == "log.retention.ms" else ms  # Kafka: any negative is -1
        value = self.get(defn.name)
        expected = _PYTHON_TYPES[defn.type]
        is_bool_for_int = expected is int and isinstance(value, bool)
        if value is not None and (not isinstance(value, expected) or is_bool_for_int):
            raise TypeError(f"{defn.name} is not {defn.type.value}: {value!r}")
        return value

    def optional_int(self, key: str) -> int | None:
        value = self.get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        raise TypeError(f"{key} is not an integer: {value!r}")

    def ms(self, key: str) -> int:
        """The first of ``key`` and its synonyms that has a value, in milliseconds."""
        for name in (key, *DEFS_BY_NAME[key].synonyms):
            value = self.optional_int(name)
            if value is not None:
                return value * _MS_PER_UNIT[name.rsplit(".", 1)[1]]
        raise TypeError(f"{key} has no value and no synonym with a default")

    def optional_text(self, key: str) -> str | None:
        value = self.get(key)
        if value is None or isinstance(value, str):
            return value
        raise TypeError(f"{key} is not a string: {value!r}")

    def text(self, key: str) -> str:
        value = self.optional_text(key)
        if value is None:
            raise TypeError(f"{key} has no value")
        return value

"""The broker (service-wide) configuration: ``server.properties`` + ``--override``, parsed once at start-up.

Built in the composition root and passed down as narrow values; never a global. Every field is a key of
:data:`~service.config.definitions.CONFIG_DEFS` with ``.`` → ``_``. Keys with synonyms hold the
*resolved* value, as Kafka's ``KafkaConfig`` accessors do:

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from service.config.definitions import (
    CONFIG_DEFS,
    DEFS_BY_NAME,
    DEFS_BY_TOPIC_NAME,
    SPARK_PREFIX,
    ConfigDef,
    ConfigSource,
    ConfigType,
    ConfigValue,
    InvalidConfigError,
    parse_value,
)
from service.config.kafka_broker_keys import KAFKA_BROKER_KEYS
from service.config.properties import parse_overrides, read_properties_checked

__all__ = ["EMBEDDED_LOG_DIRS", "BrokerConfig", "load_broker_config"]

EMBEDDED_LOG_DIRS = ("./data/logs",)
_MS_PER_UNIT = {"ms": 1, "minutes": 60_000, "hours": 3_600_000}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Typed broker settings; build with :meth:`from_properties` or :func:`load_broker_config`."""

    log_dirs: tuple[str, ...]
    log_dir_paths: tuple[Path, ...]
    """``log_dirs`` resolved (see the module docstring): what the service opens."""
    log_dir: str
    log_segment_bytes: int
    log_roll_ms: int
    log_roll_hours: int
    log_roll_jitter_ms: int
    log_roll_jitter_hours: int
    log_retention_ms: int
    log_retention_minutes: int | None
    log_retention_hours: int
    log_retention_bytes: int
    log_retention_check_interval_ms: int
    log_cleanup_policy: tuple[str, ...]
    log_cleaner_enable: bool
    log_cleaner_threads: int
    log_cleaner_min_cleanable_ratio: float
    log_cleaner_backoff_ms: int
    log_cleaner_dedupe_buffer_size: int
    log_cleaner_io_buffer_size: int
    log_cleaner_io_buffer_load_factor: float
    log_cleaner_io_max_bytes_per_second: float
    log_cleaner_delete_retention_ms: int
    log_cleaner_min_compaction_lag_ms: int
    log_cleaner_max_compaction_lag_ms: int
    log_cleaner_engine: str
    log_cleaner_spark_min_bytes: int
    log_cleaner_spark_max_logs_per_job: int
    log_cleaner_uncleanable_retry_backoff_ms: int
    log_cleaner_spill_dir: str | None
    log_message_timestamp_type: str
    log_message_timestamp_before_max_ms: int
    log_message_timestamp_after_max_ms: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int
    log_flush_scheduler_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    log_flush_start_offset_checkpoint_interval_ms: int
    replica_high_watermark_checkpoint_interval_ms: int
    log_index_interval_bytes: int
    log_index_size_max_bytes: int
    log_segment_delete_delay_ms: int
    log_preallocate: bool
    producer_id_expiration_ms: int
    producer_id_expiration_check_interval_ms: int
    num_recovery_threads_per_data_dir: int
    num_partitions: int
    message_max_bytes: int
    offsets_topic_segment_bytes: int
    transaction_state_log_segment_bytes: int
    metadata_log_dir: str | None
    metadata_log_ignore: bool
    unknown_topic_configs: str
    api_host: str
    api_port: int
    api_auth_token_file: str | None
    api_auth_allow_anonymous: bool
    api_allowed_hosts: tuple[str, ...]
    api_allowed_origins: tuple[str, ...]
    api_max_request_bytes: int
    api_max_records_per_request: int
    api_max_fetch_records: int
    api_max_fetch_bytes: int
    scheduler_initial_delay_ms: int
    shutdown_timeout_ms: int
    spark_master: str
    spark_conf: Mapping[str, str]
    """Every ``spark.*`` key to hand to Spark, ``spark.master`` included (with its default)."""
    explicit_keys: frozenset[str]
    """The keys set in the file or by ``--override`` (the ``broker`` source); the rest are defaults."""
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

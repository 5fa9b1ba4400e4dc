"""The topic-level settings one partition log obeys (Kafka ``LogConfig``), with Kafka's defaults.

Attribute names are Kafka's topic config names with ``.`` → ``_``. Defaults are Kafka 3.x's (the
contract keeps 3.x's 14-byte ``segment.bytes`` minimum; ``message.timestamp.after.max.ms`` is unlimited as
in 3.x, where 4.0 GA defaults to one hour). The service's configuration layer builds these from the broker
settings and topic overrides.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from service.storage.records import TimestampType

__all__ = ["LONG_MAX", "LogConfig"]

LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1_048_588
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    cleanup_policy: frozenset[str] = field(default_factory=lambda: frozenset({"delete"}))
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    delete_retention_ms: int = 86_400_000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    preallocate: bool = False
    config_sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    """Each topic config name and where its value came from (``override``, ``metadata``, ``broker`` …):
    for the explain view; empty when the config was built directly. Not compared: the same values obey
    the same rules, wherever they came from."""
    configs_unknown: bool = False
    """The topic's own configs are not known (a ZooKeeper-era broker's copy: they are in ZooKeeper): the
    values above are the broker's, but its policy is not taken as the topic's. Such a log is neither
    compacted nor deleted by policy: retention and the cleaner leave it alone."""

    @property
    def is_compacted(self) -> bool:
        return "compact" in self.cleanup_policy and not self.configs_unknown

    @property
    def has_delete_policy(self) -> bool:
        return "delete" in self.cleanup_policy and not self.configs_unknown

    @property
    def max_segment_ms(self) -> int:
        """``segment.ms``, capped by ``max.compaction.lag.ms`` for compacted topics (``maxSegmentMs``)."""
        if self.is_compacted and self.max_compaction_lag_ms > 0:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

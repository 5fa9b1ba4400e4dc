"""Steps the round-trip tests share: hand a topic's configs to logcleaner, read where the broker left a
partition's active segment, and say how two record lists differ."""

from __future__ import annotations

from collections.abc import Sequence

from tests.kafka.broker import KafkaBroker
from tests.kafka.checks import segment_base_offsets
from tests.kafka.clients import ConsumedRecord
from tests.kafka.run_logcleaner import log_dir_options, logcleaner

__all__ = ["active_segment_base", "differences", "set_topic_configs"]


def set_topic_configs(broker: KafkaBroker, topic: str, configs: dict[str, str]) -> None:
    """``logcleaner topic-config --set`` the configs the topic was created with on the broker."""
    sets = [arg for key, value in configs.items() for arg in ("--set", f"{key}={value}")]
    logcleaner("topic-config", "--topic", topic, *sets, *log_dir_options(broker.log_dir))


def active_segment_base(broker: KafkaBroker, topic: str, partition: int = 0, min_segments: int = 4) -> int:
    """The base offset of the partition's active segment, once the broker is stopped: with nothing open
    and no compaction lag, the cleaner's first uncleanable offset."""
    bases = segment_base_offsets(broker.log_dir / f"{topic}-{partition}")
    assert len(bases) >= min_segments, f"{topic}-{partition}: the broker rolled too few segments: {bases}"
    return bases[-1]


def differences(expected: Sequence[ConsumedRecord], actual: Sequence[ConsumedRecord]) -> str:
    """Empty when equal; else the counts and the first records present on one side only."""
    if list(expected) == list(actual):
        return ""
    missing = [r for r in expected if r not in actual][:3]
    extra = [r for r in actual if r not in expected][:3]
    return f"expected {len(expected)} records, got {len(actual)}; missing {missing}; unexpected {extra}"

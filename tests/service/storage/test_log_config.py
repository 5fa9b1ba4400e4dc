"""``LogConfig``'s derived rules: which cleanup policies apply (none when the topic's configs are
unknown), Kafka's ``LogConfig.maxSegmentMs`` (a compacted log rolls by ``max.compaction.lag.ms`` too),
and what equality compares (the values, not where they came from)."""

from __future__ import annotations

import pytest

from service.storage.log_config import LONG_MAX, LogConfig


@pytest.mark.parametrize(
    ("policy", "compacted", "deleting"),
    [
        ({"delete"}, False, True),
        ({"compact"}, True, False),
        ({"compact", "delete"}, True, True),
        (set(), False, False),  # no policy: neither the cleaner nor retention
    ],
)
def test_the_policies_follow_cleanup_policy(policy: set[str], compacted: bool, deleting: bool) -> None:
    config = LogConfig(cleanup_policy=frozenset(policy))
    assert (config.is_compacted, config.has_delete_policy) == (compacted, deleting)


def test_unknown_configs_apply_no_policy() -> None:
    """A ZooKeeper-era copy whose topic configs are elsewhere: the broker's policy is not taken as the
    topic's, so neither the cleaner nor retention touches it."""
    config = LogConfig(cleanup_policy=frozenset({"compact", "delete"}), configs_unknown=True)
    assert not config.is_compacted and not config.has_delete_policy


@pytest.mark.parametrize(
    ("policy", "segment_ms", "max_lag_ms", "expected"),
    [
        ({"compact"}, 1000, 300, 300),  # the lag caps the roll: a dirty active segment cannot wait longer
        ({"compact"}, 300, 1000, 300),
        ({"compact"}, 1000, LONG_MAX, 1000),  # the default lag caps nothing
        ({"compact"}, 1000, 0, 1000),  # Kafka: only a positive lag caps
        ({"delete"}, 1000, 300, 1000),  # not compacted: segment.ms alone
        ({"compact", "delete"}, 1000, 300, 300),
    ],
)
def test_max_segment_ms_is_kafkas(policy: set[str], segment_ms: int, max_lag_ms: int, expected: int) -> None:
    config = LogConfig(
        cleanup_policy=frozenset(policy), segment_ms=segment_ms, max_compaction_lag_ms=max_lag_ms
    )
    assert config.max_segment_ms == expected


def test_max_segment_ms_ignores_the_lag_when_configs_are_unknown() -> None:
    config = LogConfig(
        cleanup_policy=frozenset({"compact"}),
        segment_ms=1000,
        max_compaction_lag_ms=300,
        configs_unknown=True,
    )
    assert config.max_segment_ms == 1000


def test_equal_values_are_equal_whatever_their_sources() -> None:
    overridden = LogConfig(retention_ms=5, config_sources=(("retention.ms", "override"),))
    from_broker = LogConfig(retention_ms=5, config_sources=(("retention.ms", "broker"),))
    assert overridden == from_broker and hash(overridden) == hash(from_broker)
    assert overridden != LogConfig(retention_ms=6)


def test_a_config_is_frozen() -> None:
    config = LogConfig()
    with pytest.raises(AttributeError):
        config.retention_ms = 1  # type: ignore[misc]  # the point: assignment is refused

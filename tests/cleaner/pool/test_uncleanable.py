"""The uncleanable partitions' registry: the retry backoff doubling up to an hour, -1 as Kafka's "until
restart", a requested retry, the lifecycle's audit lines; driven by the manual clock."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cleaner.pool.uncleanable import MAX_RETRY_BACKOFF_MS, UncleanablePartitions, retry_delay_ms
from service.base.audit import AUDIT_LOGGER_NAME
from service.base.clock import ManualClock
from service.storage.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
DIR = Path("/logs")


@pytest.mark.parametrize(
    ("backoff_ms", "attempts", "delay_ms"),
    [
        (600_000, 1, 600_000),
        (600_000, 2, 1_200_000),
        (600_000, 3, 2_400_000),
        (600_000, 4, MAX_RETRY_BACKOFF_MS),
        (600_000, 60, MAX_RETRY_BACKOFF_MS),
        (0, 5, 0),
        (7_200_000, 3, 7_200_000),  # a backoff above an hour is not shortened
        (-1, 1, None),
    ],
)
def test_the_retry_backoff_doubles_per_attempt_up_to_an_hour(
    backoff_ms: int, attempts: int, delay_ms: int | None
) -> None:
    assert retry_delay_ms(backoff_ms, attempts) == delay_ms


def test_a_partition_is_skipped_until_its_retry_then_tried_and_its_attempts_count_on(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    registry = UncleanablePartitions(clock, 1000)
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER_NAME)
    first = registry.mark(DIR, TP, "CorruptDataError: bad CRC", 500, by="kafka-log-cleaner-thread-0")
    since = clock.now_ms()
    assert (first.attempts, first.since_ms, first.next_retry_ms) == (1, since, since + 1000)
    assert registry.is_uncleanable(DIR, TP)
    assert not registry.is_uncleanable(Path("/other"), TP), "another dir's replica is not this one"
    clock.advance(999)
    assert registry.is_uncleanable(DIR, TP)
    clock.advance(1)
    assert not registry.is_uncleanable(DIR, TP), "due: the selection tries it"
    assert registry.entries() == [], "a partition being tried again is not listed as uncleanable"
    again = registry.mark(DIR, TP, "CorruptDataError: bad CRC again", 500, by="kafka-log-cleaner-thread-0")
    assert (again.attempts, again.since_ms) == (2, since), "attempts count on; since is the first failure"
    assert again.next_retry_ms == clock.now_ms() + 2000
    assert again.to_json()["reason"] == "CorruptDataError: bad CRC again"
    registry.cleaned(TP)
    assert registry.entries() == [] and not registry.is_uncleanable(DIR, TP)
    assert registry.mark(DIR, TP, "x", 1, by="t").attempts == 1, "a success forgets the attempts"
    lines = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER_NAME]
    assert lines[0] == (
        "kafka-log-cleaner-thread-0: gave up cleaning t-0 in /logs (attempt 1): CorruptDataError: bad CRC; "
        "next try in 1s"
    )
    assert lines[1].startswith("retrying cleaning of t-0 in /logs (attempt 2; uncleanable since ")
    assert "gave up cleaning t-0 in /logs (attempt 2)" in lines[2] and "next try in 2s" in lines[2]
    assert lines[3] == "t-0 in /logs is cleanable again after 2 failed attempt(s)"


def test_minus_one_keeps_a_partition_uncleanable_until_restart(clock: ManualClock) -> None:
    registry = UncleanablePartitions(clock, -1)
    entry = registry.mark(DIR, TP, "OSError: gone", 10, by="t")
    assert entry.next_retry_ms is None and entry.to_json()["next_retry"] is None
    clock.advance(10 * 365 * 86_400_000)
    assert registry.is_uncleanable(DIR, TP)
    assert registry.mark(DIR, TP, "OSError: gone", 10, by="t").next_retry_ms is None


def test_a_requested_retry_is_due_at_once_and_only_for_an_uncleanable_partition(clock: ManualClock) -> None:
    registry = UncleanablePartitions(clock, -1)
    with pytest.raises(LookupError):
        registry.request_retry(TP)
    registry.mark(DIR, TP, "OSError: gone", 10, by="t")
    entry = registry.request_retry(TP)
    assert entry.next_retry_ms == clock.now_ms() and entry.to_json()["next_retry"] is not None
    assert entry.is_due(clock.now_ms())
    assert not registry.is_uncleanable(DIR, TP)
    with pytest.raises(LookupError):
        registry.request_retry(TP)  # being tried: not uncleanable now


def test_partitions_no_longer_live_in_their_dir_are_forgotten(clock: ManualClock) -> None:
    registry = UncleanablePartitions(clock, 1000)
    registry.mark(DIR, TP, "x", 1, by="t")
    registry.mark(DIR, TopicPartition("u", 1), "y", 1, by="t")
    registry.prune({TP: DIR, TopicPartition("u", 1): Path("/moved")}.get)
    assert [e.topic_partition for e in registry.entries()] == [TP]

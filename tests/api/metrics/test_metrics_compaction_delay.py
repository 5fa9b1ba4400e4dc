"""``logcleaner_cleaner_compaction_delay_seconds`` on a real daemon: what LogCleanerCompactionLate reads.

A partition is late only while the cleaner would pick it and has not: a high dirty share under a higher
``min.cleanable.dirty.ratio`` is 0 however long it lasts; a partition above its ratio counts from the scrape
that first found it so, and a cleaning sets it back to 0; past ``max.compaction.lag.ms`` it counts from the
moment the lag passed for its oldest dirty batch. These check the series a daemon exports, with its real
cleaner and topic configs; the tracker's rules on their own are in
``tests/service/core/test_compaction_delay.py``."""

from __future__ import annotations

from pathlib import Path

from service.base.clock import ManualClock
from service.core.cleanable import log_to_clean
from service.shell.daemon import Daemon
from service.storage.log import PartitionLog
from service.storage.records import Record
from tests.api.metrics_helpers import Scrape, running_daemon

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DELAY = "logcleaner_cleaner_compaction_delay_seconds"


def append(log: PartitionLog, count: int, timestamp: int) -> None:
    """``count`` batches of one record, all under one key: with 100-byte segments, a segment each."""
    for n in range(count):
        log.append_records([Record(0, timestamp, b"key", b"value-%d" % n)])


def delay_of(daemon: Daemon, topic: str) -> float | None:
    return Scrape.of(daemon.metrics_registry).value(DELAY, topic=topic, partition="0")


def configure(daemon: Daemon, topic: str, configs: dict[str, object]) -> None:
    daemon.topic_store.update(topic, configs)
    daemon.refresh_topic_configs()


def test_dirty_under_a_higher_ratio_is_not_late_cleanable_is_until_cleaned(tmp_path: Path) -> None:
    clock = ManualClock()
    with running_daemon([tmp_path], {"log.segment.bytes": "100"}, clock=clock) as daemon:
        configure(daemon, "profiles", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.99})
        [log] = daemon.log_manager.create_topic("profiles", 1)
        cleaner = daemon.cleaner
        assert cleaner is not None
        append(log, 3, clock.now_ms())
        cleaner.clean_partition(log.topic_partition)
        checkpoint = cleaner.manager.all_checkpoints()[log.topic_partition]
        append(log, 12, clock.now_ms())
        ratio = log_to_clean(log, checkpoint, clock.now_ms()).cleanable_ratio
        assert 0.9 < ratio <= 0.99  # "96% dirty under min.cleanable.dirty.ratio=0.99"

        assert cleaner.clean_filthiest() == (None, False)  # not due: the cleaner picks nothing
        scrape = Scrape.of(daemon.metrics_registry)
        assert scrape.value("kafka_log_logcleanermanager_max_dirty_percent") == int(100 * ratio)
        assert scrape.value(DELAY, topic="profiles", partition="0") == 0
        clock.advance(2 * HOUR_MS)
        assert delay_of(daemon, "profiles") == 0  # however long it stays so

        configure(daemon, "profiles", {"min.cleanable.dirty.ratio": 0.5})  # now the cleaner would pick it
        assert delay_of(daemon, "profiles") == 0  # first seen cleanable now
        clock.advance(10 * MINUTE_MS)
        assert delay_of(daemon, "profiles") == 600
        clock.advance(MINUTE_MS)
        assert delay_of(daemon, "profiles") == 660

        cleaner.clean_partition(log.topic_partition)
        assert delay_of(daemon, "profiles") == 0
        append(log, 12, clock.now_ms())  # dirty again after the cleaning: counts afresh
        assert delay_of(daemon, "profiles") == 0
        clock.advance(MINUTE_MS)
        assert delay_of(daemon, "profiles") == 60


def test_past_max_compaction_lag_it_counts_from_when_the_lag_passed(tmp_path: Path) -> None:
    clock = ManualClock()
    three_hours_ago = clock.now_ms() - 3 * HOUR_MS
    with running_daemon([tmp_path], {"log.segment.bytes": "100"}, clock=clock) as daemon:
        # a ratio no log exceeds: only max.compaction.lag.ms can make it due
        configure(daemon, "late", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 1.0})
        [log] = daemon.log_manager.create_topic("late", 1)
        append(log, 2, three_hours_ago)
        assert delay_of(daemon, "late") == 0  # max.compaction.lag.ms is Long.MAX by default

        configure(daemon, "late", {"max.compaction.lag.ms": HOUR_MS})

        assert delay_of(daemon, "late") == 2 * 3600  # due since an hour after its oldest dirty batch
        clock.advance(MINUTE_MS)
        assert delay_of(daemon, "late") == 2 * 3600 + 60


def test_only_compacted_partitions_and_only_with_a_cleaner(tmp_path: Path) -> None:
    for enabled in ("true", "false"):
        with running_daemon([tmp_path / enabled], {"log.cleaner.enable": enabled}) as daemon:
            configure(daemon, "profiles", {"cleanup.policy": "compact"})
            daemon.log_manager.create_topic("profiles", 1)
            daemon.log_manager.create_topic("orders", 1)
            series = set(Scrape.of(daemon.metrics_registry).series(DELAY))

        expected = {frozenset({("topic", "profiles"), ("partition", "0")})} if enabled == "true" else set()
        assert series == expected, enabled

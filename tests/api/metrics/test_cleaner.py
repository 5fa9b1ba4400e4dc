"""The log cleaner's gauges (``api/metrics/cleaner.py``) on a real daemon: a real cleaning's figures,
Kafka's idle values without a cleaner, and uncleanable partitions per log dir."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from api.metrics.service_metrics import ServiceMetrics
from service.base.clock import ManualClock
from service.core.log_manager import LogManager
from service.core.ports import CleanerFigures, PartitionScrapes, SummaryView
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.api.metrics_helpers import Scrape, running_daemon

KAFKA_CLEANER_GAUGES = {
    "kafka_log_logcleaner_max_buffer_utilization_percent": "max_buffer_utilization_percent",
    "kafka_log_logcleaner_cleaner_recopy_percent": "cleaner_recopy_percent",
    "kafka_log_logcleaner_max_clean_time_secs": "max_clean_time_secs",
    "kafka_log_logcleaner_max_compaction_delay_secs": "max_compaction_delay_secs",
    "kafka_log_logcleaner_deadthreadcount": "dead_thread_count",
    "kafka_log_logcleanermanager_max_dirty_percent": "max_dirty_percent",
    "kafka_log_logcleanermanager_time_since_last_run_ms": "time_since_last_run_ms",
}


def test_cleaner_gauges_are_the_cleaners_figures(tmp_path: Path) -> None:
    clock = ManualClock()  # the cleaner's figures stand still between the scrape and the comparison
    with running_daemon([tmp_path], {"log.cleanup.policy": "compact"}, clock=clock) as daemon:
        [log] = daemon.log_manager.create_topic("orders", 1)
        for n in range(20):
            log.append_records([Record(0, clock.now_ms(), b"key-%d" % (n % 4), b"value-%d" % n)])
        log.roll()
        cleaner = daemon.cleaner_view
        assert cleaner is not None
        cleaner.clean_partition(TopicPartition("orders", 0))
        scrape = Scrape.of(daemon.metrics_registry)
        figures = cleaner.figures()

    assert figures.bytes_read_total > figures.bytes_written_total > 0
    assert figures.cleaner_recopy_percent > 0
    # Kafka's gauges are doubles: a buffer filled 0.0001% is not 0%, a round of 12 ms not 0 s (the round
    # takes no time on the manual clock, but is not rounded down to a whole second either)
    assert 0 < figures.max_buffer_utilization_percent < 1
    assert isinstance(figures.max_clean_time_secs, float)
    assert scrape.value("logcleaner_cleaner_round_duration_seconds_count", engine="in-process") == 1
    assert scrape.value("logcleaner_cleaner_round_duration_seconds_count", engine="spark") == 0
    assert scrape.value("logcleaner_cleaner_rounds_total", engine="in-process") == 1
    for name, field in KAFKA_CLEANER_GAUGES.items():
        assert scrape.value(name) == getattr(figures, field), name
    assert scrape.value("logcleaner_cleaner_bytes_read_total") == figures.bytes_read_total
    assert scrape.value("logcleaner_cleaner_bytes_written_total") == figures.bytes_written_total
    directory = str(tmp_path.resolve())
    assert (
        scrape.value("kafka_log_logcleanermanager_uncleanable_partitions_count", logDirectory=directory) == 0
    )
    assert scrape.value("kafka_log_logcleanermanager_uncleanable_bytes", logDirectory=directory) == 0


def test_without_a_cleaner_the_gauges_hold_kafkas_idle_values(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    with running_daemon(dirs, {"log.cleaner.enable": "false"}) as daemon:
        assert daemon.cleaner_view is None
        scrape = Scrape.of(daemon.metrics_registry)

    for name in [*KAFKA_CLEANER_GAUGES, "logcleaner_cleaner_bytes_read_total"]:
        assert scrape.value(name) == 0, name
    for directory in dirs:
        labels = {"logDirectory": str(directory.resolve())}
        assert scrape.value("kafka_log_logcleanermanager_uncleanable_partitions_count", **labels) == 0
        assert scrape.value("kafka_log_logcleanermanager_uncleanable_bytes", **labels) == 0


@dataclass
class FixedCleaner:
    """A CleanerView whose figures a test sets (the real cleaner marks partitions uncleanable only on
    unexpected errors)."""

    fixed: CleanerFigures

    def figures(self) -> CleanerFigures:
        return self.fixed

    def status(self) -> dict[str, object]:
        return {}

    def clean_partition(self, tp: TopicPartition) -> dict[str, object]:
        return {}

    def retry_uncleanable(self, tp: TopicPartition) -> dict[str, object]:
        return {}


@dataclass
class Source:
    log_manager: LogManager
    cleaner_view: FixedCleaner
    explain_summary: SummaryView
    partition_figures: PartitionScrapes


def test_uncleanable_partitions_are_reported_per_log_dir(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    with running_daemon([a, b]) as daemon:
        cleaner = daemon.cleaner_view
        assert cleaner is not None
        figures = replace(
            cleaner.figures(),
            uncleanable={a.resolve(): (2, 4096)},
            uncleanable_past_retry={a.resolve(): 1},
            dead_thread_count=1,
            thread_restarts=3,
            rounds_spilled_total=2,
        )
        metrics = ServiceMetrics(
            Source(
                daemon.log_manager, FixedCleaner(figures), daemon.view.summary, daemon.view.partition_figures
            )
        )
        scrape = Scrape.of(metrics.registry)

    count, size = (
        "kafka_log_logcleanermanager_uncleanable_partitions_count",
        "kafka_log_logcleanermanager_uncleanable_bytes",
    )
    assert scrape.series(count) == {
        frozenset({("logDirectory", str(a.resolve()))}): 2,
        frozenset({("logDirectory", str(b.resolve()))}): 0,
    }
    assert scrape.value(size, logDirectory=str(a.resolve())) == 4096
    assert scrape.value(size, logDirectory=str(b.resolve())) == 0
    assert scrape.value("logcleaner_cleaner_uncleanable_partitions_past_retry") == 1
    assert scrape.value("kafka_log_logcleaner_deadthreadcount") == 1
    assert scrape.value("logcleaner_cleaner_thread_restarts_total") == 3
    assert scrape.value("logcleaner_cleaner_rounds_spilled_total") == 2
    assert scrape.types["logcleaner_cleaner_thread_restarts"] == "counter"
    assert scrape.value("logcleaner_cleaner_threads") == 0, "QUIET: log.cleaner.threads=0"

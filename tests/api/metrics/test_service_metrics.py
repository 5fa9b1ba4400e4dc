"""The metrics of the daemon's other parts, on a real daemon: scheduled runs and their outcomes, the
cleaner's gauges (a real cleaning, no cleaner at all, uncleanable partitions), offline log dirs, and the
registry emptied at shutdown."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from api.metrics.service_metrics import ServiceMetrics
from service.base.clock import ManualClock
from service.core.log_manager import LogManager
from service.core.ports import CleanerFigures, PartitionScrapes, SummaryView
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.api.metrics_helpers import Scrape, running_daemon, take_offline

KAFKA_CLEANER_GAUGES = {
    "kafka_log_logcleaner_max_buffer_utilization_percent": "max_buffer_utilization_percent",
    "kafka_log_logcleaner_cleaner_recopy_percent": "cleaner_recopy_percent",
    "kafka_log_logcleaner_max_clean_time_secs": "max_clean_time_secs",
    "kafka_log_logcleaner_max_compaction_delay_secs": "max_compaction_delay_secs",
    "kafka_log_logcleaner_deadthreadcount": "dead_thread_count",
    "kafka_log_logcleanermanager_max_dirty_percent": "max_dirty_percent",
    "kafka_log_logcleanermanager_time_since_last_run_ms": "time_since_last_run_ms",
}


def test_scheduled_runs_are_counted_by_task_and_outcome(tmp_path: Path) -> None:
    with running_daemon([tmp_path], {"scheduler.initial.delay.ms": "500"}) as daemon:
        scheduler = daemon.scheduler

        def fail() -> None:
            raise RuntimeError("boom")

        scheduler.add_periodic("always-fails", 3_600_000, fail)
        deadline = time.monotonic() + 30
        while not all(j.runs >= 1 for j in scheduler.jobs() if j.period_ms is not None):
            assert time.monotonic() < deadline, scheduler.jobs()
            time.sleep(0.05)
        scheduler.shutdown(wait=True)  # the counts stop moving
        jobs = {j.name: j for j in scheduler.jobs()}
        scrape = Scrape.of(daemon.metrics_registry)

    assert jobs["always-fails"].failures == 1 and jobs["kafka-log-retention"].runs >= 1
    for name, job in jobs.items():
        counted = {
            outcome: scrape.value("logcleaner_scheduler_job_runs_total", task=name, outcome=outcome)
            for outcome in ("success", "failure", "skipped")
        }
        assert counted == {
            "success": job.runs - job.failures,
            "failure": job.failures,
            "skipped": job.skipped,
        }
        assert scrape.value("logcleaner_scheduler_job_duration_seconds_count", task=name) == job.runs
        assert (
            scrape.value("logcleaner_scheduler_job_duration_seconds_bucket", task=name, le="+Inf") == job.runs
        )


def test_tasks_are_exported_at_zero_before_their_first_run(tmp_path: Path) -> None:
    with running_daemon([tmp_path]) as daemon:  # every task waits an hour
        scrape = Scrape.of(daemon.metrics_registry)
        names = {j.name for j in daemon.scheduler.jobs()}

    assert "kafka-log-retention" in names and "logcleaner-topic-config-refresh" in names
    assert "delete-file" not in names  # one-shot: scheduled by the first retention that deletes
    for name in [*names, "delete-file"]:
        # but the topic-config refresh (every half second) and the summary (built at once): no initial delay
        waits = name not in ("logcleaner-topic-config-refresh", "logcleaner-explain-summary")
        for outcome in ("success", "failure", "skipped"):
            runs = scrape.value("logcleaner_scheduler_job_runs_total", task=name, outcome=outcome)
            assert runs == 0 if waits else runs is not None, (name, outcome, runs)
        runs = scrape.value("logcleaner_scheduler_job_duration_seconds_count", task=name)
        assert runs == 0 if waits else runs is not None, (name, runs)


def test_a_first_delete_file_run_is_counted_from_zero(tmp_path: Path) -> None:
    """A one-shot task whose first run fails: increase() sees 0 → 1, not a series born at 1."""
    clock = ManualClock()
    overrides = {"log.segment.bytes": "100", "log.retention.ms": "1000"}
    with running_daemon([tmp_path], overrides, clock=clock) as d:
        [log] = d.log_manager.create_topic("orders", 1)
        for _ in range(3):
            log.append_records([Record(0, clock.now_ms(), None, b"value")])
        before = Scrape.of(d.metrics_registry)
        clock.advance(60_000)
        deleted = d.log_manager.cleanup_logs()  # schedules delete-file after file.delete.delay.ms
        assert deleted
        d.metrics.on_job_outcome("delete-file", "failure", 0.01)  # as the scheduler reports a failed run
        after = Scrape.of(d.metrics_registry)

    assert before.value("logcleaner_scheduler_job_runs_total", task="delete-file", outcome="failure") == 0
    assert after.value("logcleaner_scheduler_job_runs_total", task="delete-file", outcome="failure") == 1


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


def test_an_offline_log_dir_is_counted_and_its_partitions_stay_visible(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    clock = ManualClock()
    overrides = {"log.segment.bytes": "100", "log.retention.ms": "3600000"}
    with running_daemon([a, b], overrides, clock=clock) as daemon:
        on_a, on_b = daemon.log_manager.create_topic("orders", 2)  # one in each dir
        assert on_b.directory.parent == b.resolve()
        for log in (on_a, on_b):
            for timestamp in (clock.now_ms() + 86_400_000, clock.now_ms()):  # a segment a day ahead
                log.append_records([Record(0, timestamp, None, b"value")])
        before = Scrape.of(daemon.metrics_registry)
        take_offline(daemon, b.resolve())
        after = Scrape.of(daemon.metrics_registry)
        later = Scrape.of(daemon.metrics_registry)  # still there at the scrapes after

    assert before.value("kafka_log_logmanager_offlinelogdirectorycount") == 0
    assert after.value("kafka_log_logmanager_offlinelogdirectorycount") == 1
    assert after.value("kafka_log_logmanager_logdirectoryoffline", logDirectory=str(a.resolve())) == 0
    assert after.value("kafka_log_logmanager_logdirectoryoffline", logDirectory=str(b.resolve())) == 1
    assert set(after.series("kafka_log_logcleanermanager_uncleanable_bytes")) == {
        frozenset({("logDirectory", str(a.resolve()))})
    }
    partition_names = [
        "kafka_log_log_size",
        "kafka_log_log_numlogsegments",
        "kafka_log_log_logstartoffset",
        "kafka_log_log_logendoffset",
        "logcleaner_retention_future_timestamp_segments",
    ]
    for scrape in (after, later):
        for name in partition_names:  # the last known values, both partitions
            assert scrape.series(name) == before.series(name), name
        assert scrape.series("logcleaner_partition_offline") == {
            frozenset({("topic", "orders"), ("partition", "1")}): 1
        }
    assert before.series("logcleaner_partition_offline") == {}


def test_shutdown_empties_the_registry(tmp_path: Path) -> None:
    with running_daemon([tmp_path]) as daemon:
        daemon.log_manager.create_topic("orders", 1)
        registry = daemon.metrics_registry
        assert list(registry.collect())

    assert list(registry.collect()) == []
    daemon.metrics.close()  # idempotent

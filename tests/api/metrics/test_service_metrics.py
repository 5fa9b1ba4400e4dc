"""``ServiceMetrics`` on a real daemon: scheduled runs and their outcomes, and the registry emptied at
shutdown (the cleaner's gauges: ``test_cleaner.py``; the LogManager's figures: ``test_log_manager.py``)."""

from __future__ import annotations

import time
from pathlib import Path

from service.base.clock import ManualClock
from service.storage.records import Record
from tests.api.metrics_helpers import Scrape, running_daemon


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


def test_shutdown_empties_the_registry(tmp_path: Path) -> None:
    with running_daemon([tmp_path]) as daemon:
        daemon.log_manager.create_topic("orders", 1)
        registry = daemon.metrics_registry
        assert list(registry.collect())

    assert list(registry.collect()) == []
    daemon.metrics.close()  # idempotent

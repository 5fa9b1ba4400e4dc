"""LogScheduler on the real APScheduler: Kafka's job names, initial delay, no overlap, failures isolated."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from scheduler.log_scheduler import LogScheduler
from service.base.clock import SystemClock

LONG_MAX = (1 << 63) - 1


@pytest.fixture
def scheduler() -> Iterator[LogScheduler]:
    outcomes: list[tuple[str, str]] = []
    sched = LogScheduler(
        SystemClock(), initial_delay_ms=100, on_outcome=lambda j, o, _s: outcomes.append((j, o))
    )
    sched.outcomes = outcomes  # type: ignore[attr-defined]  # recorded for the assertions below
    yield sched
    sched.shutdown(wait=True)


def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail("timed out")
        time.sleep(0.02)


def status(sched: LogScheduler, name: str):  # type: ignore[no-untyped-def]
    return next(j for j in sched.jobs() if j.name == name)


def test_periodic_job_waits_for_the_initial_delay_then_repeats(scheduler: LogScheduler) -> None:
    runs: list[float] = []
    started = time.monotonic()
    scheduler.add_periodic("kafka-log-retention", 100, lambda: runs.append(time.monotonic()))
    scheduler.start()
    wait_until(lambda: status(scheduler, "kafka-log-retention").runs >= 3)  # counted once each returned
    assert len(runs) >= 3
    assert runs[0] - started >= 0.09, "no run before scheduler.initial.delay.ms"
    job = status(scheduler, "kafka-log-retention")
    assert job.period_ms == 100
    assert job.runs >= 3 and job.failures == 0 and job.last_error is None
    assert job.last_duration_ms is not None and job.next_run_ms is not None


def test_a_failing_job_is_counted_and_runs_again(scheduler: LogScheduler) -> None:
    calls = []

    def fail() -> None:
        calls.append(1)
        raise OSError("disk on fire")

    scheduler.add_periodic("kafka-log-flusher", 50, fail)
    scheduler.start()
    # a run is counted once the task has raised, a moment after its call began
    wait_until(lambda: status(scheduler, "kafka-log-flusher").failures >= 3)
    job = status(scheduler, "kafka-log-flusher")
    assert len(calls) >= 3
    assert job.last_error == "OSError: disk on fire"
    assert ("kafka-log-flusher", "failure") in scheduler.outcomes  # type: ignore[attr-defined]


def test_runs_of_one_job_never_overlap(scheduler: LogScheduler) -> None:
    running = threading.Semaphore(1)
    overlaps = []
    runs = []

    def slow() -> None:
        if not running.acquire(blocking=False):
            overlaps.append(1)
            return
        time.sleep(0.25)
        runs.append(1)
        running.release()

    scheduler.add_periodic("kafka-recovery-point-checkpoint", 50, slow)
    scheduler.start()
    wait_until(lambda: len(runs) >= 2)
    assert overlaps == []


def test_long_max_period_runs_once(scheduler: LogScheduler) -> None:
    runs: list[int] = []
    scheduler.add_periodic("kafka-log-flusher", LONG_MAX, lambda: runs.append(1))
    scheduler.start()
    wait_until(lambda: runs == [1])
    time.sleep(0.3)
    assert runs == [1]
    assert status(scheduler, "kafka-log-flusher").next_run_ms is None


def test_self_rescheduling_job_uses_the_delay_it_returns(scheduler: LogScheduler) -> None:
    runs: list[float] = []

    def delete_logs() -> int:
        runs.append(time.monotonic())
        return 150

    scheduler.add_self_rescheduling("kafka-delete-logs", delete_logs)
    scheduler.start()
    wait_until(lambda: len(runs) >= 3)
    assert runs[2] - runs[1] >= 0.14
    assert status(scheduler, "kafka-delete-logs").period_ms is None


def test_schedule_once_runs_a_task_after_its_delay(scheduler: LogScheduler) -> None:
    scheduler.start()
    done = threading.Event()
    started = time.monotonic()
    scheduler.schedule_once("delete-file", 150, done.set)
    assert done.wait(5)
    assert time.monotonic() - started >= 0.14
    assert status(scheduler, "delete-file").runs == 1


def test_jobs_are_listed_before_start_and_a_zero_initial_delay_runs_at_once() -> None:
    ran = threading.Event()
    scheduler = LogScheduler(SystemClock(), initial_delay_ms=0)
    scheduler.add_periodic("kafka-log-flusher", 3_600_000, ran.set)
    assert [job.name for job in scheduler.jobs()] == ["kafka-log-flusher"], "listed before start()"
    time.sleep(0.05)  # the start date is now in the past when the scheduler starts
    scheduler.start()
    try:
        assert ran.wait(5), "first run right after the (zero) initial delay, not one period later"
    finally:
        scheduler.shutdown()

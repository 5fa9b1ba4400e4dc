"""Stopping the scheduler while a task runs never deadlocks, and is bounded (issue: SIGTERM during retention).

Each test holds a real task in flight on an event, calls ``shutdown`` from another thread, then lets the
task end the way the daemon's tasks end: a periodic task returns, a self-rescheduling one asks for its next
run, and a retention-like task asks for a one-shot delayed deletion. On APScheduler's
``shutdown(wait=True)``
the last two waited for its job-store lock forever.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from scheduler.log_scheduler import LogScheduler
from service.base.clock import SystemClock


def started_scheduler() -> LogScheduler:
    sched = LogScheduler(SystemClock(), initial_delay_ms=0)
    return sched


def stop_while_in_flight(
    sched: LogScheduler, entered: threading.Event, release: threading.Event, timeout_s: float = 10.0
) -> tuple[list[str], float]:
    """Wait for the task to run, start ``shutdown`` in a thread, release the task; shutdown's result."""
    assert entered.wait(10), "the task never started"
    result: list[list[str]] = []
    stopper = threading.Thread(target=lambda: result.append(sched.shutdown(wait=True)), daemon=True)
    start = time.monotonic()
    stopper.start()
    time.sleep(0.2)  # shutdown is under way while the task still runs
    release.set()
    stopper.join(timeout_s)
    assert not stopper.is_alive(), "shutdown deadlocked with a task in flight"
    return result[0], time.monotonic() - start


def blocking_task(
    entered: threading.Event, release: threading.Event, then: Callable[[], object]
) -> Callable[[], object]:
    def task() -> object:
        entered.set()
        release.wait(30)
        return then()

    return task


def test_stop_during_a_periodic_task_returns() -> None:
    sched, entered, release = started_scheduler(), threading.Event(), threading.Event()
    sched.add_periodic("kafka-log-flusher", 50, blocking_task(entered, release, lambda: None))
    sched.start()
    still_running, _ = stop_while_in_flight(sched, entered, release)
    assert still_running == []


def test_stop_during_a_self_rescheduling_task_returns_and_adds_nothing() -> None:
    sched, entered, release = started_scheduler(), threading.Event(), threading.Event()
    sched.add_self_rescheduling("kafka-delete-logs", blocking_task(entered, release, lambda: 10))  # type: ignore[arg-type]
    sched.start()
    still_running, _ = stop_while_in_flight(sched, entered, release)
    assert still_running == []
    assert all(job.next_run_ms is None for job in sched.jobs())


def test_stop_during_a_task_that_schedules_a_one_shot_deletion_returns() -> None:
    sched, entered, release = started_scheduler(), threading.Event(), threading.Event()
    deleted: list[str] = []

    def ask_for_deletion() -> None:
        sched.schedule_once("delete-file", 0, lambda: deleted.append("file"))

    sched.add_periodic("kafka-log-retention", 300_000, blocking_task(entered, release, ask_for_deletion))
    sched.start()
    still_running, _ = stop_while_in_flight(sched, entered, release)
    assert still_running == []
    time.sleep(0.2)
    assert deleted == []  # left for the next start's clean-up of .deleted files, never run after the stop


def test_stop_is_bounded_when_a_task_never_returns() -> None:
    sched, entered, release = started_scheduler(), threading.Event(), threading.Event()
    sched.add_periodic("kafka-log-retention", 300_000, blocking_task(entered, release, lambda: None))
    sched.start()
    assert entered.wait(10)
    start = time.monotonic()
    still_running = sched.shutdown(wait=True, timeout_s=0.5)
    assert 0.4 < time.monotonic() - start < 5
    assert still_running == ["kafka-log-retention"]
    release.set()


@pytest.mark.parametrize("wait", [True, False])
def test_no_task_starts_once_the_stop_began(wait: bool) -> None:
    sched = started_scheduler()
    runs: list[int] = []
    sched.add_periodic("kafka-log-flusher", 20, lambda: runs.append(1))
    sched.start()
    sched.shutdown(wait=wait)
    count = len(runs)
    time.sleep(0.2)
    assert len(runs) == count

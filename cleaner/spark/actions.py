"""Running one Spark action for a cleaner worker: its FAIR pool, abortable, timed.

The action runs on a helper thread (PySpark's ``InheritableThread``, so the JVM side of the thread is
released with it) that puts its jobs in a job group of their own with the round's description (what the
Spark UI shows: ``logcleaner: clean orders-3 [1200, 58000), 1.2 GiB``), in the worker's scheduler pool, and
tags them (Spark's job tags, 3.5+) with the round's own tag and ``CLEANER_JOB_TAG``. The worker's thread
meanwhile calls ``check_aborted`` every ``poll_interval_s``: an abort (partition deleted, cleaner shutting
down) cancels the round's jobs by its tag at once instead of after the whole job, and the abort is
re-raised once the action has returned; stopping the session cancels every job ``CLEANER_JOB_TAG`` marks.
``on_job`` hears each action's wall time in seconds, failed ones included
(``logcleaner_spark_job_duration_seconds``). With ``reports`` (``task_files``), the worker's thread waits on
them instead and hands each to ``on_report`` as it arrives, between the abort checks, and once more after
the action has returned.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from pyspark.sql import SparkSession
from pyspark.util import InheritableThread

from cleaner.spark.session import CLEANER_JOB_TAG

if TYPE_CHECKING:
    from cleaner.spark.task_files import JobReports

__all__ = ["run_action"]

T = TypeVar("T")


class _Outcome(Generic[T]):
    """What the helper thread produced; written by it, read by the caller after ``join``."""

    def __init__(self) -> None:
        self.value: T | None = None
        self.error: BaseException | None = None
        self.done = False


def run_action(
    spark: SparkSession,
    action: Callable[[], T],
    *,
    pool: str,
    description: str,
    check_aborted: Callable[[], None],
    on_job: Callable[[float], None] | None = None,
    poll_interval_s: float = 0.1,
    reports: JobReports | None = None,
    on_report: Callable[[object], None] = lambda _report: None,
) -> T:
    """``action()`` on Spark in ``pool``; raises what it raised, or the abort that cancelled it. An error
    ``on_report`` raises cancels the job, as an abort does."""
    context = spark.sparkContext
    group = f"logcleaner-{uuid.uuid4().hex}"  # the round's job group, and its job tag
    outcome: _Outcome[T] = _Outcome()

    def target() -> None:
        context.setJobGroup(group, description, interruptOnCancel=True)
        context.setInterruptOnCancel(True)  # for a cancel by tag too
        context.addJobTag(group)
        context.addJobTag(CLEANER_JOB_TAG)
        context.setLocalProperty("spark.scheduler.pool", pool)
        try:
            outcome.value = action()
            outcome.done = True
        except BaseException as exc:  # handed to the caller's thread
            outcome.error = exc
        finally:
            if reports is not None:
                reports.wake()

    check_aborted()
    thread = InheritableThread(target=target, name=f"{threading.current_thread().name}-spark", daemon=True)
    started = time.monotonic()
    thread.start()
    try:
        while thread.is_alive():
            if reports is None:
                thread.join(poll_interval_s)
            elif reports.wait(poll_interval_s, on_report):
                thread.join()  # the action has returned: its thread ends now
            if thread.is_alive():
                check_aborted()
    except BaseException:
        context.cancelJobsWithTag(group)
        thread.join()
        _wait_for_tasks(spark, group)
        raise
    finally:
        if on_job is not None:
            on_job(time.monotonic() - started)
    if outcome.error is not None:
        _wait_for_tasks(spark, group)  # a failed job's other tasks may still be writing files
        raise outcome.error
    if not outcome.done:
        raise RuntimeError(f"Spark action {description!r} ended without a result")
    if reports is not None:
        reports.wait(0.0, on_report)  # the last ones: an item a retried task skipped is reported only here
    return outcome.value  # type: ignore[return-value]  # done: the action returned a T


def _wait_for_tasks(spark: SparkSession, group: str, timeout_s: float = 60.0) -> None:
    """After a cancel: until no task of the group runs, so none writes a file after the caller cleans up.

    A cancelled job fails at once, but its running tasks stop only as Spark kills them (Python workers
    within ``spark.python.task.killTimeout``).
    """
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stages = [
            stage
            for job_id in tracker.getJobIdsForGroup(group)
            if (job := tracker.getJobInfo(job_id)) is not None
            for stage in job.stageIds
        ]
        if all((info := tracker.getStageInfo(s)) is None or info.numActiveTasks == 0 for s in stages):
            return
        time.sleep(0.05)

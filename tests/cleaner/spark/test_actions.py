"""A round's Spark action: its jobs in a group of their own with the round's description, tagged with the
round's tag and the cleaner's, cancelled by tag on an abort or when the cleaner's jobs are cancelled."""

from __future__ import annotations

import threading
import time

import pytest

from cleaner.errors import CleaningAbortedError
from cleaner.spark.actions import run_action
from cleaner.spark.session import CLEANER_JOB_TAG, SparkSessionHolder

DESCRIPTION = "logcleaner: clean orders-3 [1200, 58000), 1.2 GiB"


def _never_aborted() -> None:
    return None


def test_a_rounds_jobs_carry_its_description_pool_and_tags(spark_holder: SparkSessionHolder) -> None:
    spark = spark_holder.get()
    context = spark.sparkContext

    def action() -> tuple[set[str], str | None, str | None, int]:
        count = context.parallelize(range(10), 2).count()  # a real job, under the properties read below
        return (
            set(context.getJobTags()),
            context.getLocalProperty("spark.job.description"),
            context.getLocalProperty("spark.scheduler.pool"),
            count,
        )

    tags, description, pool, count = run_action(
        spark, action, pool="logcleaner-cleaner-0", description=DESCRIPTION, check_aborted=_never_aborted
    )
    assert count == 10
    assert description == DESCRIPTION and pool == "logcleaner-cleaner-0"
    (round_tag,) = tags - {CLEANER_JOB_TAG}
    assert CLEANER_JOB_TAG in tags and round_tag.startswith("logcleaner-")
    assert set(context.getJobTags()) == set()  # the caller's thread carries none of them


def _sleeping(x: int) -> int:
    time.sleep(120)
    return x


def _slow_job(spark_holder: SparkSessionHolder) -> int:
    """A job whose tasks sleep far longer than any test waits: only a cancel ends it soon."""
    return spark_holder.get().sparkContext.parallelize(range(2), 2).map(_sleeping).count()


def test_an_abort_cancels_the_rounds_jobs_by_its_tag(spark_holder: SparkSessionHolder) -> None:
    deadline = time.monotonic() + 1.0

    def abort_after_a_second() -> None:
        if time.monotonic() > deadline:
            raise CleaningAbortedError("aborted by the test")

    started = time.monotonic()
    with pytest.raises(CleaningAbortedError):
        run_action(
            spark_holder.get(),
            lambda: _slow_job(spark_holder),
            pool="logcleaner-cleaner-0",
            description=DESCRIPTION,
            check_aborted=abort_after_a_second,
        )
    assert time.monotonic() - started < 60
    assert spark_holder.get().sparkContext.statusTracker().getActiveJobsIds() == []


def test_cancelling_the_cleaners_tag_ends_a_running_round(spark_holder: SparkSessionHolder) -> None:
    """What ``SparkSessionHolder.stop`` does before it stops the session (``serve`` stopping)."""
    spark = spark_holder.get()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            run_action(
                spark,
                lambda: _slow_job(spark_holder),
                pool="logcleaner-cleaner-0",
                description=DESCRIPTION,
                check_aborted=_never_aborted,
            )
        except BaseException as exc:  # the cancelled job's error, checked below
            outcome.append(exc)

    round_thread = threading.Thread(target=run)
    round_thread.start()
    tracker = spark.sparkContext.statusTracker()
    while not tracker.getActiveJobsIds():
        time.sleep(0.05)
    started = time.monotonic()
    spark.sparkContext.cancelJobsWithTag(CLEANER_JOB_TAG)
    round_thread.join(timeout=90)
    assert not round_thread.is_alive() and time.monotonic() - started < 60
    assert len(outcome) == 1 and "cancelled" in str(outcome[0]).lower(), outcome

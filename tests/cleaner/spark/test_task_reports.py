"""Task reports (``task_reports``): each job's driver hears its own tasks' reports, by the time the job
ends; a closed job's reports are dropped; the driver keeps none; a wake ends a wait at once."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from cleaner.spark.session import SparkSessionHolder
from cleaner.spark.task_reports import ReportChannel, ReportSender


def sending(sender: ReportSender, tag: str) -> Callable[[int, Iterable[int]], Iterator[int]]:
    def run(partition: int, rows: Iterable[int]) -> Iterator[int]:
        sender.send((tag, partition))
        return iter(rows)

    return run


def test_each_job_hears_its_own_tasks_and_the_driver_keeps_nothing(spark_holder: SparkSessionHolder) -> None:
    context = spark_holder.get().sparkContext
    channel = ReportChannel(context)
    first, second, closed = channel.open_job(), channel.open_job(), channel.open_job()
    closed.close()
    for job, tag in ((first, "first"), (second, "second"), (closed, "closed")):
        context.parallelize(range(6), 3).mapPartitionsWithIndex(sending(job.sender, tag)).collect()
    heard: dict[str, list[object]] = {"first": [], "second": [], "closed": []}
    for job, tag in ((first, "first"), (second, "second"), (closed, "closed")):
        job.wait(0.0, heard[tag].append)
    assert len(heard["first"]) == 3 and set(heard["first"]) == {("first", 0), ("first", 1), ("first", 2)}
    assert len(heard["second"]) == 3 and set(heard["second"]) == {("second", 0), ("second", 1), ("second", 2)}
    assert heard["closed"] == []
    assert first.sender.accumulator.value == [], "the driver's accumulator holds no report"
    first.close()
    second.close()


def test_a_wake_ends_a_wait_at_once(spark_holder: SparkSessionHolder) -> None:
    job = ReportChannel(spark_holder.get().sparkContext).open_job()
    started = time.monotonic()
    assert job.wait(0.05, print) is False
    job.wake()
    assert job.wait(30.0, print) is True
    assert time.monotonic() - started < 5.0
    job.close()

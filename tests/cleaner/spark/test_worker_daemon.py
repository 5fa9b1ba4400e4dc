"""A task's Python worker: forked from ``worker_daemon`` with its objects frozen, on a Unix domain socket.

Both keep a task's fixed cost small: PySpark collects garbage after every task, and over loopback TCP each
task waited tens of milliseconds (``session.DEFAULT_SPARK_CONF``).
"""

from __future__ import annotations

import gc
import os
import sys

from cleaner.spark.session import SparkSessionHolder


def _worker_state(_partition: int, _rows: object) -> list[tuple[int, int, str, bool]]:
    return [
        (
            gc.get_freeze_count(),
            len(gc.get_objects()),
            os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED", "").lower(),
            "cleaner.spark.rewrite" in sys.modules,
        )
    ]


def test_a_task_runs_in_a_worker_whose_preloaded_modules_the_collector_skips(
    spark_holder: SparkSessionHolder,
) -> None:
    context = spark_holder.get().sparkContext
    states = context.parallelize(range(2), 2).mapPartitionsWithIndex(_worker_state).collect()
    assert len(states) == 2
    for frozen, tracked, _socket, preloaded in states:
        assert preloaded
        assert frozen > 10 * tracked, f"{frozen} objects frozen, {tracked} left to each collection"


def test_a_task_talks_to_its_executor_over_a_unix_domain_socket(spark_holder: SparkSessionHolder) -> None:
    context = spark_holder.get().sparkContext
    states = context.parallelize(range(2), 2).mapPartitionsWithIndex(_worker_state).collect()
    assert {socket for _frozen, _tracked, socket, _preloaded in states} == {"true"}

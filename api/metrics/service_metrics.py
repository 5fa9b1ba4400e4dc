"""The one entry point to the service's metrics: a registry the composition root owns, the scrape-time
collectors over the live state, and the recorders the scheduler, the cleaner and the Spark engine call.

Names are the documented ones, exactly. Scheduled tasks are labelled ``task``, not ``job``: Prometheus
keeps ``job`` for the scrape job and would rename ours ``exported_job`` (and, under ``honor_labels``,
overwrite the scrape job's). The recorders are prometheus_client's own thread-safe Counter and Histograms;
``_lock`` guards only ``_tasks_seen``. ``close`` unregisters everything (at shutdown), so a late scrape
never reads closed logs.

``_created`` series are off (``disable_created_metrics``, process-wide): no dashboard reads them, and each
counter and histogram would add one more series with its parent's help text.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.registry import Collector

from api.fetch import FetchFaults
from api.metrics.build_info import build_info
from api.metrics.cleaner import CleanerCollector
from api.metrics.exposition import ExpositionRegistry
from api.metrics.loading import LoadingCollector
from api.metrics.log_manager import LogManagerCollector
from api.metrics.partitions import PartitionCollector
from api.metrics.source import MetricsSource
from api.metrics.summary import SummaryCollector

__all__ = ["CLEANER_ENGINES", "JOB_OUTCOMES", "ONE_SHOT_TASKS", "ServiceMetrics"]

JOB_OUTCOMES = ("success", "failure", "skipped")
# Tasks scheduled one run at a time (LogManager's delayed segment deletion): they are not in the
# scheduler's job list at start-up, so their series are created here, at 0, before any run.
ONE_SHOT_TASKS = ("delete-file",)
CLEANER_ENGINES = ("in-process", "spark")

# From a flush or a checkpoint (milliseconds) to a retention pass over a large archive (minutes).
_JOB_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)
# A Spark job: a fraction of a second warm on a small log, an hour on a large one.
_SPARK_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
# A cleaning round: milliseconds in-process on a small log, an hour on Spark over a large one.
_ROUND_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class ServiceMetrics:
    def __init__(
        self, source: MetricsSource, registry: CollectorRegistry | None = None, *, version: str | None = None
    ) -> None:
        """``source`` is read at each scrape; ``registry`` defaults to a fresh ``ExpositionRegistry`` (never
        the global one);
        ``version`` (for ``logcleaner_build_info``) to the installed distribution's."""
        disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
        self.registry = registry if registry is not None else ExpositionRegistry()
        self._lock = threading.Lock()
        self._tasks_seen: set[str] = set()
        self.fetch_faults = FetchFaults()  # the API's fetch route records into it (``create_app``)
        self._task_runs = Counter(
            "logcleaner_scheduler_job_runs_total",
            "Runs of each scheduled task, by outcome (success, failure, skipped: missed or still running)",
            ("task", "outcome"),
            registry=None,
        )
        self._task_duration = Histogram(
            "logcleaner_scheduler_job_duration_seconds",
            "Duration of each scheduled task's runs",
            ("task",),
            buckets=_JOB_BUCKETS,
            registry=None,
        )
        self._spark_duration = Histogram(
            "logcleaner_spark_job_duration_seconds",
            "Duration of the Spark jobs that compact logs",
            buckets=_SPARK_BUCKETS,
            registry=None,
        )
        self._round_duration = Histogram(
            "logcleaner_cleaner_round_duration_seconds",
            "Duration of each cleaning round, by the engine that ran it",
            ("engine",),
            buckets=_ROUND_BUCKETS,
            registry=None,
        )
        for engine in CLEANER_ENGINES:
            self._round_duration.labels(engine)
        self._collectors: list[Collector] = [
            # process_open_fds, process_max_fds, process_resident_memory_bytes...: what the descriptor
            # budget is watched with; python_info: the interpreter. The global registry has them; a fresh
            # one needs them added.
            ProcessCollector(registry=None),
            PlatformCollector(registry=None),
            build_info(version),
            PartitionCollector(source),
            LogManagerCollector(source, self.fetch_faults),
            LoadingCollector(source),
            CleanerCollector(source),
            SummaryCollector(source),
            self._task_runs,
            self._task_duration,
            self._spark_duration,
            self._round_duration,
        ]
        for collector in self._collectors:
            self.registry.register(collector)
        self.declare_jobs(ONE_SHOT_TASKS)

    def declare_jobs(self, jobs: Iterable[str]) -> None:
        """Create each task's series at 0 before its first run, so increase() sees even a first failure."""
        for task in jobs:
            self._declare(task)

    def on_job_outcome(self, task: str, outcome: str, seconds: float) -> None:
        """``LogScheduler``'s ``on_outcome``: count the run; time it unless it was skipped."""
        self._declare(task)  # a task not declared gets all of its series, at 0, before this run counts
        self._task_runs.labels(task, outcome).inc()
        if outcome != "skipped":
            self._task_duration.labels(task).observe(seconds)

    def _declare(self, task: str) -> None:
        with self._lock:
            if task in self._tasks_seen:
                return
            self._tasks_seen.add(task)
        for outcome in JOB_OUTCOMES:
            self._task_runs.labels(task, outcome)
        self._task_duration.labels(task)

    def observe_spark_job(self, seconds: float) -> None:
        """The Spark engine's callback: one compaction job took ``seconds``."""
        self._spark_duration.observe(seconds)

    def observe_cleaner_round(self, engine: str, seconds: float) -> None:
        """The log cleaner's callback: one cleaning round on ``engine`` took ``seconds``."""
        self._round_duration.labels(engine).observe(seconds)

    def close(self) -> None:
        """Unregister every collector (idempotent): the logs they read are about to close."""
        with self._lock:
            collectors, self._collectors = self._collectors, []
        for collector in collectors:
            self.registry.unregister(collector)

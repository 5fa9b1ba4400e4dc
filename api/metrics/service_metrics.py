"""The one entry point to the service's metrics: a registry the composition root owns, the scrape-time
collectors over the live state, and the recorders the scheduler and the Spark engine call.

Names are the documented ones, exactly. The recorders are prometheus_client's own thread-safe Counter and
Histograms; ``_lock`` guards only ``_jobs_seen``. ``close`` unregisters everything (at shutdown), so a
late scrape never reads closed logs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.registry import Collector

from api.metrics.cleaner import CleanerCollector
from api.metrics.loading import LoadingCollector
from api.metrics.log_manager import LogManagerCollector
from api.metrics.partitions import PartitionCollector
from api.metrics.source import MetricsSource

__all__ = ["JOB_OUTCOMES", "ServiceMetrics"]

JOB_OUTCOMES = ("success", "failure", "skipped")

# From a flush or a checkpoint (milliseconds) to a retention pass over a large archive (minutes).
_JOB_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)
# A Spark job: a fraction of a second warm on a small log, an hour on a large one.
_SPARK_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class ServiceMetrics:
    def __init__(self, source: MetricsSource, registry: CollectorRegistry | None = None) -> None:
        """``source`` is read at each scrape; ``registry`` defaults to a fresh one (never the global)."""
        self.registry = registry if registry is not None else CollectorRegistry()
        self._lock = threading.Lock()
        self._jobs_seen: set[str] = set()
        self._job_runs = Counter(
            "logcleaner_scheduler_job_runs_total",
            "Runs of each scheduled task, by outcome (success, failure, skipped: missed or still running)",
            ("job", "outcome"),
            registry=None,
        )
        self._job_duration = Histogram(
            "logcleaner_scheduler_job_duration_seconds",
            "Duration of each scheduled task's runs",
            ("job",),
            buckets=_JOB_BUCKETS,
            registry=None,
        )
        self._spark_duration = Histogram(
            "logcleaner_spark_job_duration_seconds",
            "Duration of the Spark jobs that compact logs",
            buckets=_SPARK_BUCKETS,
            registry=None,
        )
        self._collectors: list[Collector] = [
            # process_open_fds, process_max_fds, process_resident_memory_bytes...: what the descriptor
            # budget is watched with. The global registry has it; a fresh one needs it added.
            ProcessCollector(registry=None),
            PartitionCollector(source),
            LogManagerCollector(source),
            LoadingCollector(source),
            CleanerCollector(source),
            self._job_runs,
            self._job_duration,
            self._spark_duration,
        ]
        for collector in self._collectors:
            self.registry.register(collector)

    def declare_jobs(self, jobs: Iterable[str]) -> None:
        """Create each job's series at 0 before its first run, so increase() sees even a first failure."""
        for job in jobs:
            self._declare(job)

    def on_job_outcome(self, job: str, outcome: str, seconds: float) -> None:
        """``LogScheduler``'s ``on_outcome``: count the run; time it unless it was skipped."""
        self._declare(job)  # a job not declared (a one-shot task) gets all of its series at once
        self._job_runs.labels(job, outcome).inc()
        if outcome != "skipped":
            self._job_duration.labels(job).observe(seconds)

    def _declare(self, job: str) -> None:
        with self._lock:
            if job in self._jobs_seen:
                return
            self._jobs_seen.add(job)
        for outcome in JOB_OUTCOMES:
            self._job_runs.labels(job, outcome)
        self._job_duration.labels(job)

    def observe_spark_job(self, seconds: float) -> None:
        """The Spark engine's callback: one compaction job took ``seconds``."""
        self._spark_duration.observe(seconds)

    def close(self) -> None:
        """Unregister every collector (idempotent): the logs they read are about to close."""
        with self._lock:
            collectors, self._collectors = self._collectors, []
        for collector in collectors:
            self.registry.unregister(collector)

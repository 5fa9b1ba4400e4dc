"""The one scheduler of the process: Kafka's periodic log tasks and one-shot tasks on APScheduler 3.x.

Jobs carry Kafka's names (``kafka-log-retention``, …) as their ids and start after
``scheduler.initial.delay.ms``. One run of a job at a time (``max_instances=1``, late runs coalesced); a job
that raises is logged with its traceback, counted and runs again next period. Each job's last run,
duration and error are kept for the API. A period of Long.MAX (Kafka's default for the flusher) means
"run once". ``_lock`` guards ``_stats`` and the runs in flight; ``_add_lock`` makes "not stopping, so add
the job" one step; APScheduler guards its own job store.

No deadlock at shutdown, by design: APScheduler's ``shutdown`` holds its job-store lock, and a task that
ends reschedules itself (``add_job``) or asks for a one-shot deletion. So ``shutdown`` first marks the
scheduler stopping (under ``_add_lock``), after which nothing is added: a self-rescheduling task simply
ends, and a one-shot task asked for while stopping is dropped (Kafka's start-up removes the ``.deleted``
files it would have removed). Then APScheduler stops without waiting, and the runs in flight are waited
for on our own condition, with a bound.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from service.clock import Clock

__all__ = ["JobStatus", "LogScheduler"]

logger = logging.getLogger(__name__)

_RUN_ONCE_THRESHOLD_MS = 10 * 365 * 24 * 3600 * 1000  # longer periods than ten years run once
_OUTCOME_SUCCESS = "success"
_OUTCOME_FAILURE = "failure"
_OUTCOME_SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class JobStatus:
    name: str
    period_ms: int | None  # None: one-shot, or rescheduled by itself
    runs: int = 0
    failures: int = 0
    skipped: int = 0
    last_run_ms: int | None = None
    last_duration_ms: int | None = None
    last_error: str | None = None
    next_run_ms: int | None = None


class LogScheduler:
    def __init__(
        self,
        clock: Clock,
        *,
        initial_delay_ms: int,
        on_outcome: Callable[[str, str, float], None] | None = None,
        threads: int = 8,
    ) -> None:
        """``on_outcome(job, outcome, seconds)`` feeds metrics: outcome is success, failure or skipped."""
        self.clock = clock
        self.initial_delay_ms = initial_delay_ms
        self.on_outcome = on_outcome
        self._stats: dict[str, JobStatus] = {}
        self._lock = threading.Condition()
        self._add_lock = threading.Lock()
        self._stopping = False
        self._in_flight: dict[str, int] = {}
        self._scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(threads)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 60},
            timezone=UTC,
        )
        self._scheduler.add_listener(self._on_event, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)

    # -- jobs ------------------------------------------------------------------------------------

    def add_periodic(self, name: str, period_ms: int, task: Callable[[], object]) -> None:
        """Run ``task`` every ``period_ms``, first after the initial delay."""
        start = self._at(self.initial_delay_ms)
        if period_ms >= _RUN_ONCE_THRESHOLD_MS:
            trigger: DateTrigger | IntervalTrigger = DateTrigger(run_date=start)
        else:
            trigger = IntervalTrigger(seconds=max(period_ms, 1) / 1000, start_date=start, timezone=UTC)
        self._register(name, period_ms)
        self._scheduler.add_job(
            self._runner(name, task),
            trigger,
            id=name,
            name=name,
            replace_existing=True,
            next_run_time=start,  # an interval trigger would skip a start already past at ``start()``
        )

    def add_self_rescheduling(self, name: str, task: Callable[[], int]) -> None:
        """Run ``task`` after the initial delay, then again after the delay (ms) it returns each time."""
        self._register(name, None)

        def run_and_reschedule() -> None:
            delay_ms = self._runner(name, task)()
            self._schedule(name, max(delay_ms if isinstance(delay_ms, int) else 1000, 1), run_and_reschedule)

        self._schedule(name, self.initial_delay_ms, run_and_reschedule)

    def schedule_once(self, name: str, delay_ms: int, task: Callable[[], None]) -> None:
        """One run of ``task`` after ``delay_ms`` (Kafka's ``scheduleOnce``; the ``TaskScheduler`` port)."""
        self._register(name, None)
        with self._add_lock:
            if self._stopping:
                logger.info("Scheduler stopping: %s not scheduled (the next start does it)", name)
                return
            self._scheduler.add_job(
                self._runner(name, task),
                DateTrigger(run_date=self._at(delay_ms)),
                name=name,
                misfire_grace_time=None,
            )

    def _schedule(self, name: str, delay_ms: int, fn: Callable[[], None]) -> None:
        with self._add_lock:
            if self._stopping:
                return
            self._scheduler.add_job(
                fn, DateTrigger(run_date=self._at(delay_ms)), id=name, name=name, replace_existing=True
            )

    def _at(self, delay_ms: int) -> datetime:
        return datetime.now(UTC) + timedelta(milliseconds=delay_ms)

    def _register(self, name: str, period_ms: int | None) -> None:
        with self._lock:
            self._stats.setdefault(name, JobStatus(name, period_ms))

    def _runner(self, name: str, task: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            started_ms = self.clock.now_ms()
            start = time.perf_counter()
            error: str | None = None
            result: object = None
            with self._lock:
                self._in_flight[name] = self._in_flight.get(name, 0) + 1
            try:
                result = task()
            except Exception as exc:  # isolate: log, count, run again next period
                logger.error("Scheduled task %s failed", name, exc_info=exc)
                error = f"{type(exc).__name__}: {exc}"
            finally:
                with self._lock:
                    self._in_flight[name] -= 1
                    if not self._in_flight[name]:
                        del self._in_flight[name]
                    self._lock.notify_all()
            seconds = time.perf_counter() - start
            with self._lock:
                stats = self._stats[name]
                self._stats[name] = replace(
                    stats,
                    runs=stats.runs + 1,
                    failures=stats.failures + (error is not None),
                    last_run_ms=started_ms,
                    last_duration_ms=round(seconds * 1000),
                    last_error=error,
                )
            if self.on_outcome is not None:
                self.on_outcome(name, _OUTCOME_FAILURE if error else _OUTCOME_SUCCESS, seconds)
            return result

        return run

    def _on_event(self, event: JobExecutionEvent) -> None:
        name = event.job_id
        job = self._scheduler.get_job(name)
        label = job.name if job is not None else name
        logger.warning("Scheduled task %s was skipped (missed, or still running from its last period)", label)
        with self._lock:
            if label in self._stats:
                stats = self._stats[label]
                self._stats[label] = replace(stats, skipped=stats.skipped + 1)
        if self.on_outcome is not None:
            self.on_outcome(label, _OUTCOME_SKIPPED, 0.0)

    # -- lifecycle and status --------------------------------------------------------------------

    def start(self) -> None:
        self._scheduler.start()

    def shutdown(self, *, wait: bool = True, timeout_s: float | None = None) -> list[str]:
        """Stop scheduling; with ``wait`` the runs in flight finish first, for up to ``timeout_s``.

        Returns the names of the tasks still running (empty once every run in flight has ended).
        """
        with self._add_lock:
            self._stopping = True  # from here on no task adds a job, so none waits on APScheduler's locks
        if self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            while wait and self._in_flight:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._lock.wait(remaining)
            return sorted(self._in_flight)

    def running(self) -> list[str]:
        """The tasks running now (names), for a stop that reports what it waits for."""
        with self._lock:
            return sorted(self._in_flight)

    def jobs(self) -> list[JobStatus]:
        """Every named job (one-shot ``delete-file`` tasks included once seen), with its next run."""
        next_runs: dict[str, int] = {}
        for job in self._scheduler.get_jobs():
            if getattr(job, "next_run_time", None) is not None:  # a job added before start() has none
                at = int(job.next_run_time.timestamp() * 1000)
                next_runs[job.name] = min(at, next_runs.get(job.name, at))
        with self._lock:
            return [
                replace(s, next_run_ms=next_runs.get(s.name))
                for s in sorted(self._stats.values(), key=lambda s: s.name)
            ]

"""The one scheduler of the process: Kafka's periodic log tasks and one-shot tasks on APScheduler 3.x.

Jobs carry Kafka's names (``kafka-log-retention``, …) as their ids and start after
``scheduler.initial.delay.ms``. One run of a job at a time (``max_instances=1``, late runs coalesced); a job
that raises is logged with its traceback, counted and runs again next period. Each job's last run,
duration and error are kept for the API. A period of Long.MAX (Kafka's default for the flusher) means
"run once". ``_lock`` guards ``_stats``; APScheduler guards its own job store.

Stopping never deadlocks: APScheduler's ``shutdown(wait=True)`` holds its job-store lock while it joins the
running tasks, and a task that ends by adding a job (a periodic one rescheduling itself, retention asking
for a delayed file deletion) would wait for that lock forever. So every ``add_job`` goes through
``_add_job`` under ``_add_lock`` with the ``_stopping`` flag: ``shutdown`` sets the flag first, and from then
on nothing is added (a skipped delayed deletion leaves its ``.deleted`` file for the next start's clean-up,
as Kafka's start-up does). APScheduler is then stopped without waiting, and the runs in flight are waited
for with a bound, on the scheduler's own count of them.
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

from service.base.clock import Clock

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
        self._lock = threading.Lock()
        self._add_lock = threading.Lock()  # a job is added, or the scheduler stops: never both at once
        self._stopping = False  # guarded by _add_lock
        self._in_flight: dict[str, int] = {}  # task name -> runs in progress; guarded by _idle
        self._idle = threading.Condition()
        self._scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(threads)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 60},
            timezone=UTC,
        )
        self._scheduler.add_listener(self._on_event, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)

    # -- jobs ------------------------------------------------------------------------------------

    def add_periodic(
        self, name: str, period_ms: int, task: Callable[[], object], *, initial_delay_ms: int | None = None
    ) -> None:
        """Run ``task`` every ``period_ms``, first after ``initial_delay_ms`` (default: the initial delay)."""
        start = self._at(self.initial_delay_ms if initial_delay_ms is None else initial_delay_ms)
        if period_ms >= _RUN_ONCE_THRESHOLD_MS:
            trigger: DateTrigger | IntervalTrigger = DateTrigger(run_date=start)
        else:
            trigger = IntervalTrigger(seconds=max(period_ms, 1) / 1000, start_date=start, timezone=UTC)
        self._register(name, period_ms)
        self._add_job(
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
        self._add_job(
            self._runner(name, task),
            DateTrigger(run_date=self._at(delay_ms)),
            name=name,
            misfire_grace_time=None,
        )

    def _schedule(self, name: str, delay_ms: int, fn: Callable[[], None]) -> None:
        self._add_job(fn, DateTrigger(run_date=self._at(delay_ms)), id=name, name=name, replace_existing=True)

    def _add_job(self, fn: Callable[[], object], trigger: object, **options: object) -> None:
        """Add a job unless the scheduler is stopping (then the job is dropped, and logged)."""
        with self._add_lock:
            if self._stopping:
                logger.debug("Scheduler stopping: task %s not scheduled", options.get("name"))
                return
            self._scheduler.add_job(fn, trigger, **options)

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
            with self._idle:  # a run that APScheduler started after the stop began does nothing
                if self._stopping:
                    return None
                self._in_flight[name] = self._in_flight.get(name, 0) + 1
            try:
                result = task()
            except Exception as exc:  # isolate: log, count, run again next period
                logger.error("Scheduled task %s failed", name, exc_info=exc)
                error = f"{type(exc).__name__}: {exc}"
            finally:
                with self._idle:
                    self._in_flight[name] -= 1
                    if not self._in_flight[name]:
                        del self._in_flight[name]
                    self._idle.notify_all()
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
        """Stop scheduling; with ``wait``, wait up to ``timeout_s`` (None: no bound) for the runs in flight.

        Returns the names of the tasks still running when it returns (empty after a complete stop).
        """
        with self._add_lock:
            self._stopping = True
        if self._scheduler.running:
            self._scheduler.pause()  # no new pass over the due jobs starts
            # APScheduler sets its state to stopped before it takes its job-store lock, so a pass in progress
            # would fail to remove a one-shot job it just started (JobLookupError in its thread): let that
            # pass end first. The lock is private; APScheduler 3.x is pinned (<4) in pyproject.toml.
            with self._scheduler._jobstores_lock:
                pass
            self._scheduler.shutdown(wait=False)  # never joins under that lock (see the module doc)
        if wait:
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            with self._idle:
                while self._in_flight:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        break
                    self._idle.wait(remaining)
        with self._idle:
            return sorted(self._in_flight)

    def running(self) -> list[str]:
        """The tasks running now (names), for a stop that reports what it waits for."""
        with self._idle:
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

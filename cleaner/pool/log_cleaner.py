"""The log cleaner's pool (Kafka ``LogCleaner``): N workers, their lifecycle, forced rounds, and the figures
its metrics report (buffer utilization, recopy percent, clean time, compaction delay, dead threads).

Workers share one ``CleanerManager`` (the in-progress lock) and one stop event. ``clean_partition`` runs a
forced round for one partition on the caller's thread (the CLI and the API use it). This is the
``CleanerView`` the API and the metrics see. A supervisor thread restarts a worker that died once
``log.cleaner.backoff.ms`` has passed on the clock, and counts it. ``_lock`` guards the running totals,
``_thread_restarts`` and ``_recent``.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

from cleaner.errors import CleaningAbortedError, IllegalCleanerStateError
from cleaner.pool.manager import CleanerManager
from cleaner.pool.worker import CleanerWorker, CleanFn, JobSharing, RoundOutcome
from service.base.errors import ConflictError, NotFoundError
from service.core.ports import CleanerFigures
from service.storage.log import PartitionLog
from service.storage.topic_partition import TopicPartition

__all__ = ["LogCleaner"]

logger = logging.getLogger(__name__)

_RECENT_RUNS = 20
_SUPERVISOR_NAME = "logcleaner-cleaner-supervisor"
_MIN_POLL_MS, _MAX_POLL_MS = 10, 1000  # how often the supervisor looks for dead threads


class LogCleaner:
    def __init__(
        self,
        manager: CleanerManager,
        clean: CleanFn,
        retention: Callable[[PartitionLog], object],
        *,
        threads: int,
        backoff_ms: int,
        engine_name: str = "in-process",
        on_round: Callable[[str, float], None] | None = None,
        sharing: JobSharing | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        """``stop``: the event ``begin_stop`` sets (pass one to let a throttler's sleep end with it)."""
        self.manager = manager
        self._on_round = on_round
        self.engine_name = engine_name
        self._stop = stop or threading.Event()
        self._backoff_ms = backoff_ms
        self._lock = threading.Lock()
        self._thread_restarts = 0
        self._rounds_spilled = 0
        self._supervisor = threading.Thread(target=self._supervise, name=_SUPERVISOR_NAME, daemon=True)
        self._bytes_read_total = 0
        self._bytes_written_total = 0
        self._rounds_by_engine: collections.Counter[str] = collections.Counter()
        self._bytes_read_by_engine: collections.Counter[str] = collections.Counter()
        self._recent: collections.deque[RoundOutcome] = collections.deque(maxlen=_RECENT_RUNS)
        self.workers = [
            CleanerWorker(
                i,
                manager,
                clean,
                retention,
                backoff_ms=backoff_ms,
                stop=self._stop,
                on_outcome=self._record,
                sharing=sharing,
            )
            for i in range(threads)
        ]
        self._forced = CleanerWorker(
            -1,
            manager,
            clean,
            retention,
            backoff_ms=backoff_ms,
            stop=threading.Event(),
            on_outcome=self._record,
            sharing=sharing,
        )

    def start(self) -> None:
        for worker in self.workers:
            worker.thread.start()
        if self.workers:
            self._supervisor.start()
        logger.info("Started %d cleaner threads (%s engine)", len(self.workers), self.engine_name)

    # -- dead threads ----------------------------------------------------------------------------

    def _supervise(self) -> None:
        """Restart each dead worker once ``log.cleaner.backoff.ms`` has passed on the clock since it died;
        looks every ``_poll_s`` (the clock, not this poll, says when a restart is due)."""
        poll_s = min(max(self._backoff_ms, _MIN_POLL_MS), _MAX_POLL_MS) / 1000
        while not self._stop.wait(poll_s):
            try:
                self.restart_dead_workers()
            except Exception:  # a failed restart is tried again at the next look
                logger.exception("Restarting a dead cleaner thread failed")

    def restart_dead_workers(self) -> int:
        """Restart the workers dead for ``log.cleaner.backoff.ms`` or longer; how many were restarted."""
        now = self.manager.clock.monotonic_ms()
        restarted = 0
        for worker in self.workers:
            died = worker.died_at_ms
            if self._stop.is_set() or not worker.is_dead or died is None or now - died < self._backoff_ms:
                continue
            worker.thread.join()  # it has left its loop already: this waits for its last instructions only
            worker.restart()
            restarted += 1
            with self._lock:
                self._thread_restarts += 1
            logger.warning("Restarted %s, dead for %d ms", worker.name, now - died)
        return restarted

    def begin_stop(self) -> None:
        """Abort every round at its next check (forced ones too) and end the loops; returns at once."""
        self._stop.set()
        self._forced.stop.set()

    def shutdown(self, timeout_s: float = 60.0) -> list[TopicPartition]:
        """Stop the loops; a running round notices through its abort check and stops safely, its
        ``.cleaned`` files removed. Returns the partitions whose rounds the stop aborted."""
        self.begin_stop()
        deadline = time.monotonic() + timeout_s
        if self._supervisor.is_alive():
            self._supervisor.join(max(deadline - time.monotonic(), 0))
        for worker in self.workers:
            if worker.thread.is_alive():
                worker.thread.join(max(deadline - time.monotonic(), 0))
        return sorted(tp for w in [*self.workers, self._forced] for tp in w.stopped_rounds)

    def _record(self, outcome: RoundOutcome) -> None:
        with self._lock:
            self._bytes_read_total += outcome.bytes_read
            self._bytes_written_total += outcome.bytes_written
            self._rounds_by_engine[outcome.engine] += 1
            self._bytes_read_by_engine[outcome.engine] += outcome.bytes_read
            self._rounds_spilled += outcome.spilled
            self._recent.append(outcome)
        if self._on_round is not None:
            self._on_round(outcome.engine, outcome.duration_s)

    # -- forced rounds ---------------------------------------------------------------------------

    def clean_partition(self, tp: TopicPartition) -> dict[str, object]:
        """Clean ``tp`` now, whatever its dirty ratio (never past its first uncleanable offset)."""
        try:
            candidate = self.manager.candidate_for(tp)
        except LookupError as exc:
            raise NotFoundError(f"no partition {tp}") from exc
        except IllegalCleanerStateError as exc:
            raise ConflictError(str(exc)) from exc
        except ValueError as exc:  # not a compacted log
            raise ConflictError(str(exc)) from exc
        try:
            outcome = self._forced.run_round(candidate, reraise=True)
        except CleaningAbortedError as exc:
            raise ConflictError(f"cleaning of {tp} was aborted") from exc
        assert outcome is not None  # reraise: a round either returns its outcome or raises
        return outcome.to_json()

    def clean_filthiest(self) -> tuple[RoundOutcome | None, bool]:
        """One round for the filthiest eligible log on the caller's thread: (outcome, whether one was
        chosen). A failed round leaves the log marked uncleanable, so a loop of these ends."""
        candidate = self.manager.grab_filthiest_compacted_log()
        if candidate is None:
            return None, False
        return self._forced.run_round(candidate), True

    def clean_filthiest_logs(self) -> list[RoundOutcome | None]:
        """``clean_filthiest``, but as the workers take logs: the filthiest and, when its round goes to
        Spark, the next ones that share its job (``log.cleaner.spark.max.logs.per.job``). One entry per log
        taken (None: aborted or failed, and marked uncleanable); empty when none was eligible."""
        return self._forced.clean_filthiest_logs()

    # -- the CleanerView -------------------------------------------------------------------------

    def _outcomes(self) -> list[RoundOutcome]:
        return [w.last_outcome for w in [*self.workers, self._forced] if w.last_outcome is not None]

    @property
    def dead_thread_count(self) -> int:
        """Threads dead now (a restarted one no longer counts)."""
        return sum(w.is_dead for w in self.workers)

    @property
    def thread_restarts(self) -> int:
        with self._lock:
            return self._thread_restarts

    # -- uncleanable partitions ------------------------------------------------------------------

    def retry_uncleanable(self, tp: TopicPartition) -> dict[str, object]:
        """Try uncleanable ``tp`` again at the next selection; its entry. ``NotFoundError`` if it is not
        uncleanable."""
        try:
            return self.manager.retry_uncleanable(tp).to_json()
        except LookupError as exc:
            raise NotFoundError(f"{tp} is not uncleanable") from exc

    def figures(self) -> CleanerFigures:
        """Kafka's LogCleaner gauges: maxima over each thread's last run; recopy over those runs."""
        outcomes = self._outcomes()
        read = sum(o.bytes_read for o in outcomes)
        written = sum(o.bytes_written for o in outcomes)
        last = self.manager.last_selection_ms
        with self._lock:
            read_total, written_total = self._bytes_read_total, self._bytes_written_total
            rounds, read_by_engine = dict(self._rounds_by_engine), dict(self._bytes_read_by_engine)
            spilled = self._rounds_spilled
        return CleanerFigures(
            threads=len(self.workers),
            dead_thread_count=self.dead_thread_count,
            max_buffer_utilization_percent=max((o.buffer_utilization_percent for o in outcomes), default=0.0),
            cleaner_recopy_percent=int(100 * written / max(read, 1)),
            max_clean_time_secs=max((o.duration_s for o in outcomes), default=0.0),
            max_compaction_delay_secs=max((o.max_compaction_delay_ms // 1000 for o in outcomes), default=0),
            max_dirty_percent=self.manager.max_dirty_percent,
            time_since_last_run_ms=0 if last is None else max(self.manager.clock.now_ms() - last, 0),
            uncleanable={
                log_dir: (len(parts), sum(parts.values()))
                for log_dir, parts in self.manager.uncleanable().items()
            },
            uncleanable_past_retry=self.manager.uncleanable_past_retry(),
            thread_restarts=self.thread_restarts,
            bytes_read_total=read_total,
            bytes_written_total=written_total,
            rounds_by_engine=rounds,
            bytes_read_by_engine=read_by_engine,
            rounds_spilled_total=spilled,
        )

    def status(self) -> dict[str, object]:
        """The ``GET /v1/cleaner`` document."""
        figures = self.figures()
        with self._lock:
            recent = list(self._recent)
        return {
            "enabled": True,
            "engine": self.engine_name,
            "threads": [
                {"name": w.name, "alive": w.thread.is_alive(), "dead": w.is_dead} for w in self.workers
            ],
            "dead_thread_count": figures.dead_thread_count,
            "thread_restarts": figures.thread_restarts,
            "in_progress": [
                {"topic": tp.topic, "partition": tp.partition} for tp in self.manager.in_progress
            ],
            "paused": [
                {"topic": tp.topic, "partition": tp.partition, "reason": reason}
                for tp, reason in self.manager.paused().items()
            ],
            "uncleanable_retry_backoff_ms": self.manager.uncleanable_partitions.retry_backoff_ms,
            "uncleanable": [entry.to_json() for entry in self.manager.uncleanable_entries()],
            "max_dirty_percent": figures.max_dirty_percent,
            "time_since_last_run_ms": figures.time_since_last_run_ms,
            "max_buffer_utilization_percent": figures.max_buffer_utilization_percent,
            "cleaner_recopy_percent": figures.cleaner_recopy_percent,
            "max_clean_time_secs": figures.max_clean_time_secs,
            "max_compaction_delay_secs": figures.max_compaction_delay_secs,
            "bytes_read_total": figures.bytes_read_total,
            "bytes_written_total": figures.bytes_written_total,
            "last_runs": [o.to_json() for o in reversed(recent)],
        }

"""One cleaner thread's loop (Kafka ``CleanerThread.doWork``).

    loop until shutdown:
        clean the filthiest compacted log (an unexpected error marks that partition uncleanable); when
            its round goes to Spark, with up to log.cleaner.spark.max.logs.per.job - 1 of the next
            filthiest whose rounds do too, all in one Spark job, each log settled on its own
        retention for every compacted log not in progress and not uncleanable
        if nothing was cleaned: sleep log.cleaner.backoff.ms

A failing partition is logged with its traceback, marked uncleanable with the reason and skipped; only
shutdown ends the loop. A worker that dies anyway is counted (``DeadThreadCount``) while it is dead, and the
pool restarts it after ``log.cleaner.backoff.ms``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cleaner.errors import CleaningAbortedError
from cleaner.pool.manager import Candidate, CleanerManager, describe_failure
from service.base.audit import audit_log
from service.storage.log import PartitionLog
from service.storage.topic_partition import TopicPartition

__all__ = ["CleanFn", "CleanManyFn", "CleanerWorker", "JobSharing", "RoundOutcome"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RoundOutcome:
    """What one cleaning round did: the range, and the stats document (one ``clean`` entry)."""

    topic: str
    partition: int
    first_dirty_offset: int
    end_offset: int
    stats: dict[str, object]
    buffer_utilization_percent: float
    max_compaction_delay_ms: int
    duration_s: float
    bytes_read: int
    bytes_written: int
    engine: str = "in-process"
    spilled: bool = False  # its key map passed its thread's share of log.cleaner.dedupe.buffer.size

    def to_json(self) -> dict[str, object]:
        """One entry of the ``clean`` document."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "first_dirty_offset": self.first_dirty_offset,
            "end_offset": self.end_offset,
            "engine": self.engine,
            "stats": self.stats,
        }


CleanFn = Callable[[Candidate, Callable[[], None], int], RoundOutcome]
"""Runs one round for a candidate: (candidate, check_aborted, worker id); ``check_aborted`` raises
``CleaningAbortedError`` once the round must stop."""

CleanManyFn = Callable[
    [
        Sequence[Candidate],
        Sequence[Callable[[], None]],
        int,
        Callable[[int, "RoundOutcome | BaseException"], None],
    ],
    None,
]
"""Runs the rounds of several candidates together: (candidates, their abort checks, worker id, on_done);
``on_done(i, outcome or the exception that ended it)`` is called once per candidate, as each one ends."""


@dataclass(frozen=True, slots=True)
class JobSharing:
    """How a worker takes several logs at once: at most ``max_logs``, only while ``shares_job`` says a
    candidate's round may share a job (it goes to Spark), cleaned by ``clean_many``."""

    max_logs: int
    shares_job: Callable[[Candidate], bool]
    clean_many: CleanManyFn


class CleanerWorker:
    """``last_outcome``, ``is_dead`` and ``died_at_ms`` are written by the worker thread (and ``restart``,
    once it is dead), read by the metrics and the pool's supervisor (atomic refs)."""

    def __init__(
        self,
        worker_id: int,
        manager: CleanerManager,
        clean: CleanFn,
        retention: Callable[[PartitionLog], object],
        *,
        backoff_ms: int,
        stop: threading.Event,
        on_outcome: Callable[[RoundOutcome], None] | None = None,
        sharing: JobSharing | None = None,
    ) -> None:
        self.worker_id = worker_id
        # -1 is the worker a forced (REST) clean runs on, not one of Kafka's numbered cleaner threads
        self.name = f"kafka-log-cleaner-thread-{worker_id}" if worker_id >= 0 else "logcleaner-forced-clean"
        self.manager = manager
        self.clean = clean
        self.retention = retention
        self.backoff_ms = backoff_ms
        self.stop = stop
        self.on_outcome = on_outcome
        self.sharing = sharing
        self.last_outcome: RoundOutcome | None = None
        self.is_dead = False
        self.died_at_ms: int | None = None  # the manager's clock when it died (None: alive or never started)
        self.stopped_rounds: list[TopicPartition] = []  # rounds the stop aborted (appended by this worker)
        self.thread = self._new_thread()

    def _new_thread(self) -> threading.Thread:
        return threading.Thread(target=self.run, name=self.name, daemon=True)

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                cleaned = self.try_clean_filthiest_log()
                self.run_retention()
                if not cleaned:
                    self.stop.wait(self.backoff_ms / 1000)
        except BaseException:
            self.died_at_ms = self.manager.clock.monotonic_ms()
            self.is_dead = True
            logger.exception("%s died; it is restarted after log.cleaner.backoff.ms", self.name)
            raise

    def restart(self) -> None:
        """Run the loop again on a new thread (this one died); the pool's supervisor calls it."""
        if self.thread.is_alive():
            raise RuntimeError(f"{self.name} is still running")
        self.thread = self._new_thread()
        self.is_dead = False
        self.died_at_ms = None
        self.thread.start()

    def try_clean_filthiest_log(self) -> bool:
        return bool(self.clean_filthiest_logs())

    def clean_filthiest_logs(self) -> list[RoundOutcome | None]:
        """Grab the filthiest log (and, sharing a Spark job, the next ones) and clean them: one entry per
        log taken (None for an aborted or failed round); empty if none was eligible."""
        sharing = self.sharing
        if sharing is None or sharing.max_logs <= 1:
            candidate = self.manager.grab_filthiest_compacted_log()
            return [] if candidate is None else [self.run_round(candidate)]
        candidates = self.manager.grab_filthiest_compacted_logs(sharing.max_logs, sharing.shares_job)
        if len(candidates) == 1:
            return [self.run_round(candidates[0])]
        return self.run_rounds(candidates) if candidates else []

    def _abort_check(self, candidate: Candidate) -> Callable[[], None]:
        tp = candidate.topic_partition

        def check_aborted() -> None:
            if self.manager.is_aborted(tp) or self.stop.is_set():
                raise CleaningAbortedError(f"cleaning of {tp} was aborted")

        return check_aborted

    def run_rounds(self, candidates: Sequence[Candidate]) -> list[RoundOutcome | None]:
        """Clean several candidates already marked in progress in one ``clean_many``; each is settled
        (checkpointed, or marked uncleanable) as its own round ends, and always leaves ``in progress``."""
        sharing = self.sharing
        if sharing is None:
            raise RuntimeError(f"{self.name} cannot clean several logs at once without job sharing")
        started = time.perf_counter()
        outcomes: dict[int, RoundOutcome | None] = {}

        def on_done(i: int, ended: RoundOutcome | BaseException) -> None:
            if i not in outcomes:
                outcomes[i] = self._settle(candidates[i], ended, started, reraise=False)

        checks = [self._abort_check(c) for c in candidates]
        error: BaseException = RuntimeError("the shared cleaning job ended without reporting this log")
        try:
            sharing.clean_many(candidates, checks, self.worker_id, on_done)
        except Exception as exc:
            error = exc
            raise
        except BaseException as exc:  # an interrupt: not the logs' fault, so no log is marked uncleanable
            error = CleaningAbortedError(f"cleaning stopped by {type(exc).__name__}")
            raise
        finally:
            for i in range(len(candidates)):
                on_done(i, error)
        return [outcomes[i] for i in range(len(candidates))]

    def run_round(self, candidate: Candidate, *, reraise: bool = False) -> RoundOutcome | None:
        """Clean one candidate already marked in progress; always leaves it out of ``in progress``.

        None if the round was aborted or failed; ``reraise`` (a forced round) raises instead, after the
        same bookkeeping."""
        started = time.perf_counter()
        try:
            ended: RoundOutcome | BaseException = self.clean(
                candidate, self._abort_check(candidate), self.worker_id
            )
        except Exception as exc:
            ended = exc
        except BaseException:  # the thread's end, not the log's fault: it leaves in progress, unmarked
            self.manager.done_cleaning(candidate.log, None)
            raise
        return self._settle(candidate, ended, started, reraise=reraise)

    def _settle(
        self, candidate: Candidate, ended: RoundOutcome | BaseException, started: float, *, reraise: bool
    ) -> RoundOutcome | None:
        """The bookkeeping after one log's round: checkpoint and report it, or (aborted) leave it, or
        (failed) mark it uncleanable; in every case it leaves ``in progress``."""
        log, tp = candidate.log, candidate.topic_partition
        if isinstance(ended, CleaningAbortedError):
            logger.info("%s: cleaning of %s aborted", self.name, tp)
            if self.stop.is_set():
                self.stopped_rounds.append(tp)
            self.manager.done_cleaning(log, None)
            if reraise:
                raise ended
            return None
        if isinstance(ended, BaseException):
            logger.error(
                "%s: unexpected error cleaning %s (log dir %s); marking it uncleanable",
                self.name,
                tp,
                log.log_dir,
                exc_info=ended,
            )
            self.manager.mark_uncleanable(
                log, candidate.to_clean.cleanable_bytes, describe_failure(ended), by=self.name
            )
            self.manager.done_cleaning(log, None)
            if reraise:
                raise ended
            return None
        outcome = ended
        try:
            self.manager.done_cleaning(log, outcome.end_offset)
        except Exception as exc:  # the checkpoint's dir, not the thread: the next round cleans from the last
            logger.error("%s: cannot checkpoint the cleaning of %s: %s", self.name, tp, exc, exc_info=exc)
            if reraise:
                raise
        self.last_outcome = outcome
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        audit_log.info("%s", _round_line(self.name, log, outcome, time.perf_counter() - started))
        return outcome

    def run_retention(self) -> None:
        logs = self.manager.grab_logs_for_retention()
        try:
            for log in logs:
                try:
                    self.retention(log)
                except Exception:
                    logger.exception("%s: retention of %s failed", self.name, log.topic_partition)
        finally:
            self.manager.done_deleting(logs)


def _round_line(thread_name: str, log: PartitionLog, outcome: RoundOutcome, duration_s: float) -> str:
    """The round's audit line: Kafka's "cleaned log … (dirty section = […])" with its figures on one line."""
    records_read = _count(outcome.stats, "records_read")
    records_removed = records_read - _count(outcome.stats, "records_retained")
    return (
        f"{thread_name}: cleaned log {log.topic_partition} in {log.log_dir} (dirty section = "
        f"[{outcome.first_dirty_offset}, {outcome.end_offset}]) on the {outcome.engine} engine: "
        f"{outcome.bytes_read} bytes read, {outcome.bytes_written} bytes written, {records_read} records "
        f"read, {records_removed} removed, in {duration_s:.2f} s"
    )


def _count(stats: dict[str, object], name: str) -> int:
    value = stats.get(name, 0)
    return value if isinstance(value, int) else 0

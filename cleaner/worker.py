"""One cleaner thread's loop (Kafka ``CleanerThread``, reference §11.2).

    loop until shutdown:
        clean the filthiest compacted log (an unexpected error marks that partition uncleanable)
        retention for every compacted log not in progress and not uncleanable
        if nothing was cleaned: sleep log.cleaner.backoff.ms

A failing partition is logged with its traceback, counted and skipped; only shutdown ends the loop. A
worker that dies anyway is counted (``DeadThreadCount``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cleaner.errors import CleaningAbortedError
from cleaner.manager import Candidate, CleanerManager
from service.storage.log import PartitionLog
from service.storage.topic_partition import TopicPartition

__all__ = ["CleanFn", "CleanerWorker", "RoundOutcome"]

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


class CleanerWorker:
    """``last_outcome`` and ``is_dead`` are written by the worker thread, read by metrics (atomic refs)."""

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
        self.last_outcome: RoundOutcome | None = None
        self.is_dead = False
        self.stopped_rounds: list[TopicPartition] = []  # rounds the stop aborted (appended by this worker)
        self.thread = threading.Thread(target=self.run, name=self.name, daemon=True)

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                cleaned = self.try_clean_filthiest_log()
                self.run_retention()
                if not cleaned:
                    self.stop.wait(self.backoff_ms / 1000)
        except BaseException:
            self.is_dead = True
            logger.exception("%s died", self.name)
            raise

    def try_clean_filthiest_log(self) -> bool:
        candidate = self.manager.grab_filthiest_compacted_log()
        if candidate is None:
            return False
        self.run_round(candidate)
        return True

    def run_round(self, candidate: Candidate, *, reraise: bool = False) -> RoundOutcome | None:
        """Clean one candidate already marked in progress; always leaves it out of ``in progress``.

        None if the round was aborted or failed; ``reraise`` (a forced round) raises instead, after the
        same bookkeeping."""
        log, tp = candidate.log, candidate.topic_partition

        def check_aborted() -> None:
            if self.manager.is_aborted(tp) or self.stop.is_set():
                raise CleaningAbortedError(f"cleaning of {tp} was aborted")

        started = time.perf_counter()
        try:
            outcome = self.clean(candidate, check_aborted, self.worker_id)
        except CleaningAbortedError:
            logger.info("%s: cleaning of %s aborted", self.name, tp)
            if self.stop.is_set():
                self.stopped_rounds.append(tp)
            self.manager.done_cleaning(log, None)
            if reraise:
                raise
            return None
        except Exception:
            logger.exception(
                "%s: unexpected error cleaning %s (log dir %s); marking it uncleanable",
                self.name,
                tp,
                log.directory.parent,
            )
            self.manager.mark_uncleanable(log, candidate.to_clean.cleanable_bytes)
            self.manager.done_cleaning(log, None)
            if reraise:
                raise
            return None
        self.manager.done_cleaning(log, outcome.end_offset)
        self.last_outcome = outcome
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        logger.info(
            "%s: cleaned %s [%d, %d) in %.2f s",
            self.name,
            tp,
            outcome.first_dirty_offset,
            outcome.end_offset,
            time.perf_counter() - started,
        )
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

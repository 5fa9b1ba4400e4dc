"""The log cleaner's pool (Kafka ``LogCleaner``): N workers, their lifecycle, and the figures its metrics
report (buffer utilization, recopy percent, clean time, compaction delay, dead threads).

Workers share one ``CleanerManager`` (the in-progress lock) and one stop event. ``clean_now`` runs a forced
round for one partition on the caller's thread (the CLI and the API use it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from cleaner.manager import CleanerManager
from cleaner.worker import CleanerWorker, CleanFn, RoundOutcome
from service.errors import ConflictError
from service.storage.log import PartitionLog
from service.storage.topic_partition import TopicPartition

__all__ = ["LogCleaner"]

logger = logging.getLogger(__name__)


class LogCleaner:
    def __init__(
        self,
        manager: CleanerManager,
        clean: CleanFn,
        retention: Callable[[PartitionLog], object],
        *,
        threads: int,
        backoff_ms: int,
    ) -> None:
        self.manager = manager
        self._stop = threading.Event()
        self.workers = [
            CleanerWorker(i, manager, clean, retention, backoff_ms=backoff_ms, stop=self._stop)
            for i in range(threads)
        ]
        self._forced = CleanerWorker(
            -1, manager, clean, retention, backoff_ms=backoff_ms, stop=threading.Event()
        )

    def start(self) -> None:
        for worker in self.workers:
            worker.thread.start()
        logger.info("Started %d cleaner threads", len(self.workers))

    def shutdown(self, timeout_s: float = 60.0) -> None:
        """Stop the loops; a running round notices through its abort check and stops safely."""
        self._stop.set()
        for worker in self.workers:
            if worker.thread.is_alive():
                worker.thread.join(timeout_s)

    def clean_now(self, tp: TopicPartition) -> RoundOutcome | None:
        """A forced round for one partition, whatever its dirty ratio (never past the uncleanable offset)."""
        try:
            candidate = self.manager.candidate_for(tp)
        except LookupError as exc:
            raise ConflictError(f"partition {tp} is not live") from exc
        return self._forced.run_round(candidate)

    # -- the figures of Kafka's LogCleaner gauges -------------------------------------------------

    def _outcomes(self) -> list[RoundOutcome]:
        return [w.last_outcome for w in [*self.workers, self._forced] if w.last_outcome is not None]

    @property
    def dead_thread_count(self) -> int:
        return sum(w.is_dead for w in self.workers)

    @property
    def max_buffer_utilization_percent(self) -> int:
        return max((o.buffer_utilization_percent for o in self._outcomes()), default=0)

    @property
    def cleaner_recopy_percent(self) -> int:
        outcomes = self._outcomes()
        read = sum(o.bytes_read for o in outcomes)
        written = sum(o.bytes_written for o in outcomes)
        return int(100 * written / max(read, 1))

    @property
    def max_clean_time_secs(self) -> int:
        return int(max((o.duration_s for o in self._outcomes()), default=0))

    @property
    def max_compaction_delay_secs(self) -> int:
        return max((o.max_compaction_delay_ms // 1000 for o in self._outcomes()), default=0)

    @property
    def last_runs(self) -> list[RoundOutcome]:
        return self._outcomes()

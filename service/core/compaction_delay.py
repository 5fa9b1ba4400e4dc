"""How long each compacted partition has been waiting for the cleaner: cleanable, and not cleaned.

A high dirty share alone means nothing: at ``min.cleanable.dirty.ratio=0.99`` a log 96% dirty is not due.
A partition is late only once the cleaner would pick it (Kafka's rule, ``LogToClean.verdict``: its
cleanable ratio above its own ``min.cleanable.dirty.ratio``, or ``max.compaction.lag.ms`` passed for its
oldest dirty record) and it stays so. It has been cleanable since

- ``max.compaction.lag.ms`` after its oldest dirty batch, when that has passed (read from the log); or
- the first scrape that found it cleanable with the same first dirty offset (the cleaner's checkpoint):
  a cleaning moves that offset, so a partition cleaned and dirtied again between two scrapes starts over.

``logcleaner_cleaner_compaction_delay_seconds`` is ``now`` minus that instant, 0 when it is not cleanable.
Only with a cleaner (``log.cleaner.enable=true``): without one nothing is ever due. A partition whose log dir
went offline keeps its last state, and its delay keeps growing: it is not cleaned.

``CompactionDelayTracker`` holds the per-partition instants between scrapes; the caller runs one scrape at
a time (``ScrapeCoalescer``), so it takes no lock of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from service.base.errors import LogCleanerError
from service.core.cleanable import cleaner_checkpoints, log_to_clean
from service.storage.log import PartitionLog
from service.storage.topic_partition import TopicPartition

__all__ = ["CompactionDelayTracker", "read_cleaner_checkpoints"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Cleanable:
    first_dirty_offset: int
    since_ms: int


class CompactionDelayTracker:
    """Per compacted partition: since when it has been cleanable (absent: not cleanable)."""

    def __init__(self) -> None:
        self._cleanable: dict[TopicPartition, _Cleanable] = {}

    def update(
        self,
        logs: Mapping[TopicPartition, PartitionLog],
        checkpoints: Mapping[TopicPartition, int],
        *,
        now_ms: int,
        offline: Iterable[TopicPartition] = (),
    ) -> dict[TopicPartition, int]:
        """Each compacted partition's delay in ms (0: not cleanable): those of ``logs`` from their state
        now, those ``offline`` from their last state. Forgets partitions in neither."""
        delays: dict[TopicPartition, int] = {}
        for tp, log in logs.items():
            if not log.config.is_compacted:
                continue
            try:
                delays[tp] = self._delay(tp, log, checkpoints.get(tp), now_ms)
            except (OSError, LogCleanerError) as exc:  # one unreadable segment must not fail the scrape
                logger.warning("Cannot read the cleanable range of %s for the metrics: %s", tp, exc)
                delays[tp] = self._last_delay(tp, now_ms)
        for tp in offline:
            if tp not in delays:
                delays[tp] = self._last_delay(tp, now_ms)
        for tp in self._cleanable.keys() - delays.keys():
            del self._cleanable[tp]
        return delays

    def _delay(self, tp: TopicPartition, log: PartitionLog, checkpoint: int | None, now_ms: int) -> int:
        to_clean = log_to_clean(log, checkpoint, now_ms)
        is_cleanable, _ = to_clean.verdict(log.config.min_cleanable_dirty_ratio)
        if not is_cleanable:
            self._cleanable.pop(tp, None)
            return 0
        since = now_ms
        known = self._cleanable.get(tp)
        if known is not None and known.first_dirty_offset == to_clean.first_dirty_offset:
            since = known.since_ms
        if to_clean.needs_compaction_now:  # overdue since max.compaction.lag.ms after its oldest dirty batch
            since = min(since, now_ms - to_clean.max_compaction_delay_ms)
        self._cleanable[tp] = _Cleanable(to_clean.first_dirty_offset, since)
        return now_ms - since

    def _last_delay(self, tp: TopicPartition, now_ms: int) -> int:
        known = self._cleanable.get(tp)
        return 0 if known is None else now_ms - known.since_ms


def read_cleaner_checkpoints(logs: Iterable[PartitionLog]) -> dict[TopicPartition, int]:
    """The cleaner's first dirty offsets of ``logs``, each from its own dir's ``cleaner-offset-checkpoint``;
    a dir whose file cannot be read counts as having none (each log is then cleanable from its log start
    offset)."""
    return cleaner_checkpoints(logs, on_unreadable=_warn_unreadable)


def _warn_unreadable(log_dir: Path, exc: Exception) -> None:
    logger.warning("Cannot read the cleaner checkpoint of %s for the metrics: %s", log_dir, exc)

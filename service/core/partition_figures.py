"""The per-partition figures of a metrics scrape, read from the live logs (Kafka's ``kafka.log:type=Log``
gauges, and logcleaner's future-timestamp and compaction-delay figures).

One pass over the logs yields each log's four Kafka figures and its count of segments held back by a future
timestamp (``future_timestamps``); a second, over the compacted logs, how long each has waited for the
cleaner (``compaction_delay``). No log's lock is taken: each log's figures come from the snapshot it
publishes whenever they change (``PartitionLog.snapshot``), so a scrape never waits for a retention pass, a
cleaning or a checkpoint that holds a log. The future-timestamp check, the only part that may read a file,
reads that snapshot's segments; one deleted meanwhile keeps the last count.

A log dir that goes offline keeps its partitions: their last known figures stay (read from the logs' memory,
never their files), listed as offline, until a restart. :class:`PartitionFigures` keeps what lasts between
scrapes (the logs of the last one, those gone offline, the last future-timestamp counts, the compaction
delays); the caller runs one scrape at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from service.base.errors import LogCleanerError
from service.core.compaction_delay import CompactionDelayTracker, read_cleaner_checkpoints
from service.core.future_timestamps import count_future_timestamp_segments
from service.core.ports import LogFigures, PartitionRow, PartitionScrape
from service.storage.log import PartitionLog
from service.storage.topic_partition import TopicPartition

__all__ = ["PartitionFigures"]

logger = logging.getLogger(__name__)


class PartitionFigures:
    """Implements ``ports.PartitionScrapes`` over the LogManager's figures."""

    def __init__(self, manager: LogFigures) -> None:
        self._manager = manager
        self._seen: dict[TopicPartition, PartitionLog] = {}
        self._offline: dict[TopicPartition, PartitionLog] = {}  # logs of dirs gone offline, as last seen
        self._held: dict[TopicPartition, int] = {}  # future-timestamp segments, where there are any
        self._delays = CompactionDelayTracker()

    def scrape(self) -> PartitionScrape:
        logs, delays = self._begin()
        return PartitionScrape(list(self._rows(logs)), delays, sorted(self._offline))

    def _begin(self) -> tuple[dict[TopicPartition, PartitionLog], dict[TopicPartition, int]]:
        """The live logs now (noting those whose dir went offline since the last scrape), and each compacted
        partition's compaction delay in ms."""
        manager = self._manager
        logs = manager.logs
        offline_dirs = manager.offline_dirs
        if offline_dirs:
            for tp, log in self._seen.items():
                if tp not in logs and log.log_dir in offline_dirs:
                    self._offline[tp] = log
        self._offline = {tp: log for tp, log in self._offline.items() if tp not in logs}
        self._seen = logs
        self._held = {tp: held for tp, held in self._held.items() if tp in logs or tp in self._offline}
        if not manager.settings.cleaner_enabled:
            return logs, {}
        compacted = {tp: log for tp, log in logs.items() if log.config.is_compacted}
        checkpoints = read_cleaner_checkpoints(compacted.values()) if compacted else {}
        delays = self._delays.update(
            compacted,
            checkpoints,
            now_ms=manager.clock.now_ms(),
            offline=[tp for tp, log in self._offline.items() if log.config.is_compacted],
        )
        return logs, delays

    def _rows(self, logs: dict[TopicPartition, PartitionLog]) -> Iterator[PartitionRow]:
        manager = self._manager
        now_ms = manager.clock.now_ms()
        cleaner_enabled = manager.settings.cleaner_enabled
        for tp, log in logs.items():
            snapshot = log.snapshot  # one consistent reading, without the log's lock
            segments = snapshot.segments
            try:
                held = count_future_timestamp_segments(log, now_ms=now_ms, cleaner_enabled=cleaner_enabled)
            except (OSError, LogCleanerError) as exc:  # a segment deleted meanwhile, an unreadable index
                logger.warning("Cannot read the timestamps of %s for the metrics: %s", tp, exc)
                held = self._held.get(tp, 0)
            self._note_held(tp, held)
            yield (
                tp,
                snapshot.size_bytes,
                len(segments),
                snapshot.log_start_offset,
                snapshot.log_end_offset,
                held,
            )
        for tp, log in sorted(self._offline.items()):
            snapshot = log.snapshot  # no lock, which a thread stuck on the failed disk may hold
            yield (
                tp,
                snapshot.size_bytes,
                len(snapshot.segments),
                snapshot.log_start_offset,
                snapshot.log_end_offset,
                self._held.get(tp, 0),
            )

    def _note_held(self, tp: TopicPartition, held: int) -> None:
        if held:
            self._held[tp] = held
        else:
            self._held.pop(tp, None)

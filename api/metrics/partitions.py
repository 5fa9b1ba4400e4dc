"""Per-partition gauges, read from the live logs at each scrape (Kafka's ``kafka.log:type=Log`` gauges).

One pass over the logs yields Kafka's four per-log gauges, under the names the JMX exporter's Strimzi
rules give them, and our count of segments held back by a future timestamp. A second pass, over the
compacted logs, gives how long each has waited for the cleaner (``compaction_delay``). Labels: ``topic``,
``partition``. A deleted log's series go with it, as Kafka removes a deleted log's gauges.

A log dir that goes offline keeps its partitions visible: their last known gauges stay (read from the logs'
memory, never their files), with ``logcleaner_partition_offline`` 1, so the future-timestamp and late-
compaction alerts do not resolve and a dashboard shows what the failed disk holds, until a restart.

Cost: at 100,000 partitions the samples are most of a scrape. ``/metrics`` renders them with
``write_text``, one line per sample written straight into a buffer, not as prometheus_client ``Sample``
objects (``collect()`` builds those, for other readers of the registry). No log's lock is taken: each
log's figures come from the snapshot it publishes whenever they change (``PartitionLog.snapshot``), so a
scrape never waits for a retention pass, a cleaning or a checkpoint that holds a log. The future-timestamp
check, the only part that may read a file, reads that snapshot's segments; one deleted meanwhile keeps the
last count.
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

from api.metrics.compaction_delay import CompactionDelayTracker, read_cleaner_checkpoints
from api.metrics.exposition import TextCollector, gauge_header
from api.metrics.future_timestamps import count_future_timestamp_segments
from api.metrics.source import MetricsSource
from service.base.errors import LogCleanerError
from service.storage.log import PartitionLog
from service.storage.topic_partition import TopicPartition

__all__ = ["PartitionCollector"]

logger = logging.getLogger(__name__)

_LABELS = ("topic", "partition")

# (name, help) of each family, in the order of a row's values.
_LOG_GAUGES = (
    ("kafka_log_log_size", "Bytes of the log's segments (Kafka Log.Size)"),
    ("kafka_log_log_numlogsegments", "Segments of the log (Kafka Log.NumLogSegments)"),
    ("kafka_log_log_logstartoffset", "The log start offset (Kafka Log.LogStartOffset)"),
    ("kafka_log_log_logendoffset", "The log end offset (Kafka Log.LogEndOffset)"),
)
_FUTURE = (
    "logcleaner_retention_future_timestamp_segments",
    "Segments time retention keeps because their largest timestamp is in the future "
    "(explain reason future-timestamp); partitions without any have no series",
)
_DELAY = (
    "logcleaner_cleaner_compaction_delay_seconds",
    "How long the compacted partition has been cleanable (dirty ratio above its min.cleanable.dirty.ratio, "
    "or past max.compaction.lag.ms) and not cleaned; 0 when it is not due. Only with the cleaner enabled",
)
_OFFLINE = (
    "logcleaner_partition_offline",
    "1 for each partition of an offline log dir (its other gauges are the last known values); "
    "partitions of online dirs have no series",
)

# A log's reading: the four Kafka gauges and its future-timestamp segments (0: no series).
_Row = tuple[TopicPartition, int, int, int, int, int]


class PartitionCollector(TextCollector):
    """``_seen`` (the logs of the last scrape), ``_offline``, ``_held`` and the delay tracker persist between
    scrapes; the registry runs one scrape at a time through ``_scrape_lock``."""

    def __init__(self, source: MetricsSource) -> None:
        self._source = source
        self._scrape_lock = threading.Lock()
        self._seen: dict[TopicPartition, PartitionLog] = {}
        self._offline: dict[TopicPartition, PartitionLog] = {}  # logs of dirs gone offline, as last seen
        self._held: dict[TopicPartition, int] = {}  # future-timestamp segments, where there are any
        self._delays = CompactionDelayTracker()

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(name, doc, labels=_LABELS) for name, doc in _families()]

    def collect(self) -> Iterable[Metric]:
        families = [GaugeMetricFamily(name, doc, labels=_LABELS) for name, doc in _families()]
        size, count, start, end, future, delay, offline = (f.samples for f in families)
        names = [f.name for f in families]
        with self._scrape_lock:
            logs, delays = self._begin()
            for tp, size_bytes, segments, start_offset, end_offset, held in self._rows(logs):
                labels = _labels(tp)
                size.append(Sample(names[0], labels, size_bytes))
                count.append(Sample(names[1], labels, segments))
                start.append(Sample(names[2], labels, start_offset))
                end.append(Sample(names[3], labels, end_offset))
                if held:
                    future.append(Sample(names[4], labels, held))
            for tp, delay_ms in delays.items():
                delay.append(Sample(names[5], _labels(tp), delay_ms / 1000))
            for tp in sorted(self._offline):
                offline.append(Sample(names[6], _labels(tp), 1))
        return families

    def write_text(self, out: io.StringIO) -> None:
        buffers = [io.StringIO() for _ in _families()]
        size, count, start, end, future, delay, offline = buffers
        with self._scrape_lock:
            logs, delays = self._begin()
            for tp, size_bytes, segments, start_offset, end_offset, held in self._rows(logs):
                labels = f'topic="{_escape(tp.topic)}",partition="{tp.partition}"'
                size.write(f"kafka_log_log_size{{{labels}}} {size_bytes}\n")
                count.write(f"kafka_log_log_numlogsegments{{{labels}}} {segments}\n")
                start.write(f"kafka_log_log_logstartoffset{{{labels}}} {start_offset}\n")
                end.write(f"kafka_log_log_logendoffset{{{labels}}} {end_offset}\n")
                if held:
                    future.write(f"{_FUTURE[0]}{{{labels}}} {held}\n")
            for tp, delay_ms in delays.items():
                delay.write(f'{_DELAY[0]}{{topic="{_escape(tp.topic)}",partition="{tp.partition}"}} ')
                delay.write(f"{delay_ms / 1000}\n")
            for tp in sorted(self._offline):
                offline.write(f'{_OFFLINE[0]}{{topic="{_escape(tp.topic)}",partition="{tp.partition}"}} 1\n')
        for (name, doc), lines in zip(_families(), buffers, strict=True):
            out.write(gauge_header(name, doc))
            out.write(lines.getvalue())

    # -- one scrape --------------------------------------------------------------------------------

    def _begin(self) -> tuple[dict[TopicPartition, PartitionLog], dict[TopicPartition, int]]:
        """The live logs now (noting those whose dir went offline since the last scrape), and each compacted
        partition's compaction delay in ms."""
        manager = self._source.log_manager
        logs = manager.logs
        offline_dirs = manager.offline_dirs
        if offline_dirs:
            for tp, log in self._seen.items():
                if tp not in logs and log.directory.parent in offline_dirs:
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

    def _rows(self, logs: dict[TopicPartition, PartitionLog]) -> Iterator[_Row]:
        manager = self._source.log_manager
        now_ms = manager.clock.now_ms()
        cleaner_enabled = manager.settings.cleaner_enabled
        for tp, log in logs.items():
            snapshot = log.snapshot  # one consistent reading, without the log's lock
            segments = snapshot.segments
            row = (tp, snapshot.size_bytes, len(segments), snapshot.log_start_offset, snapshot.log_end_offset)
            try:
                held = count_future_timestamp_segments(log, now_ms=now_ms, cleaner_enabled=cleaner_enabled)
            except (OSError, LogCleanerError) as exc:  # a segment deleted meanwhile, an unreadable index
                logger.warning("Cannot read the timestamps of %s for the metrics: %s", tp, exc)
                held = self._held.get(tp, 0)
            self._note_held(tp, held)
            yield (*row, held)
        for tp, log in sorted(self._offline.items()):
            offline_row = _read_offline(log)
            if offline_row is not None:
                yield (tp, *offline_row, self._held.get(tp, 0))

    def _note_held(self, tp: TopicPartition, held: int) -> None:
        if held:
            self._held[tp] = held
        else:
            self._held.pop(tp, None)


def _families() -> tuple[tuple[str, str], ...]:
    return (*_LOG_GAUGES, _FUTURE, _DELAY, _OFFLINE)


def _labels(tp: TopicPartition) -> dict[str, str]:
    return {"topic": tp.topic, "partition": str(tp.partition)}


def _escape(value: str) -> str:
    """A label value as both formats quote it (topic names cannot need it; a copied dir might)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _read_offline(log: PartitionLog) -> tuple[int, int, int, int] | None:
    """An offline log's last figures, from its snapshot: no lock, which a thread stuck on the failed disk
    may hold."""
    snapshot = log.snapshot
    return snapshot.size_bytes, len(snapshot.segments), snapshot.log_start_offset, snapshot.log_end_offset

"""Per-partition gauges at each scrape (Kafka's ``kafka.log:type=Log`` gauges), as the core reads them
(``ports.PartitionScrapes``: ``service.core.partition_figures``, no log's lock taken).

Kafka's four per-log gauges, under the names the JMX exporter's Strimzi rules give them, our count of
segments held back by a future timestamp, and how long each compacted log has waited for the cleaner.
Labels: ``topic``, ``partition``. A deleted log's series go with it, as Kafka removes a deleted log's gauges.
A log dir that goes offline keeps its partitions visible: their last known gauges stay, with
``logcleaner_partition_offline`` 1, so the future-timestamp and late-compaction alerts do not resolve and a
dashboard shows what the failed disk holds, until a restart.

Cost: at 100,000 partitions the samples are most of a scrape. ``/metrics`` renders them with
``write_text``, one line per sample written straight into a buffer, not as prometheus_client ``Sample``
objects (``collect()`` builds those, for other readers of the registry).
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

from api.metrics.exposition import TextCollector, gauge_header
from api.metrics.source import MetricsSource
from service.core.ports import PartitionScrape
from service.storage.topic_partition import TopicPartition

__all__ = ["PartitionCollector"]

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


class PartitionCollector(TextCollector):
    """The registry runs one scrape at a time through ``_scrape_lock`` (the core's figures keep state
    between scrapes)."""

    def __init__(self, source: MetricsSource) -> None:
        self._source = source
        self._scrape_lock = threading.Lock()

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(name, doc, labels=_LABELS) for name, doc in _families()]

    def collect(self) -> Iterable[Metric]:
        families = [GaugeMetricFamily(name, doc, labels=_LABELS) for name, doc in _families()]
        size, count, start, end, future, delay, offline = (f.samples for f in families)
        names = [f.name for f in families]
        scrape = self._scrape()
        for tp, size_bytes, segments, start_offset, end_offset, held in scrape.rows:
            labels = _labels(tp)
            size.append(Sample(names[0], labels, size_bytes))
            count.append(Sample(names[1], labels, segments))
            start.append(Sample(names[2], labels, start_offset))
            end.append(Sample(names[3], labels, end_offset))
            if held:
                future.append(Sample(names[4], labels, held))
        for tp, delay_ms in scrape.delays.items():
            delay.append(Sample(names[5], _labels(tp), delay_ms / 1000))
        for tp in scrape.offline:
            offline.append(Sample(names[6], _labels(tp), 1))
        return families

    def write_text(self, out: io.StringIO) -> None:
        buffers = [io.StringIO() for _ in _families()]
        size, count, start, end, future, delay, offline = buffers
        scrape = self._scrape()
        for tp, size_bytes, segments, start_offset, end_offset, held in scrape.rows:
            labels = f'topic="{_escape(tp.topic)}",partition="{tp.partition}"'
            size.write(f"kafka_log_log_size{{{labels}}} {size_bytes}\n")
            count.write(f"kafka_log_log_numlogsegments{{{labels}}} {segments}\n")
            start.write(f"kafka_log_log_logstartoffset{{{labels}}} {start_offset}\n")
            end.write(f"kafka_log_log_logendoffset{{{labels}}} {end_offset}\n")
            if held:
                future.write(f"{_FUTURE[0]}{{{labels}}} {held}\n")
        for tp, delay_ms in scrape.delays.items():
            delay.write(f'{_DELAY[0]}{{topic="{_escape(tp.topic)}",partition="{tp.partition}"}} ')
            delay.write(f"{delay_ms / 1000}\n")
        for tp in scrape.offline:
            offline.write(f'{_OFFLINE[0]}{{topic="{_escape(tp.topic)}",partition="{tp.partition}"}} 1\n')
        for (name, doc), lines in zip(_families(), buffers, strict=True):
            out.write(gauge_header(name, doc))
            out.write(lines.getvalue())

    def _scrape(self) -> PartitionScrape:
        with self._scrape_lock:
            return self._source.partition_figures.scrape()


def _families() -> tuple[tuple[str, str], ...]:
    return (*_LOG_GAUGES, _FUTURE, _DELAY, _OFFLINE)


def _labels(tp: TopicPartition) -> dict[str, str]:
    return {"topic": tp.topic, "partition": str(tp.partition)}


def _escape(value: str) -> str:
    """A label value as both formats quote it (topic names cannot need it; a copied dir might)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")

"""Per-partition gauges, read from the live logs at each scrape (Kafka's ``kafka.log:type=Log`` gauges).

One pass over the logs yields Kafka's four per-log gauges, under the names the JMX exporter's Strimzi
rules give them, and our count of segments held back by a future timestamp. Labels: ``topic``,
``partition``. A deleted log's series go with it, as Kafka removes a deleted log's gauges.

At 10,000 partitions a scrape is mostly prometheus_client's text rendering (about 4 µs a sample here),
so the pass is lean: one lock and one labels dict per log, shared by its samples, and the future-timestamp
gauge only for the partitions that have such segments (0 is the absence of a series: ``or vector(0)``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from api.metrics.future_timestamps import count_future_timestamp_segments
from api.metrics.source import MetricsSource
from service.errors import LogCleanerError

__all__ = ["PartitionCollector"]

logger = logging.getLogger(__name__)

_LABELS = ("topic", "partition")


def _families() -> tuple[GaugeMetricFamily, ...]:
    return (
        GaugeMetricFamily(
            "kafka_log_log_size", "Bytes of the log's segments (Kafka Log.Size)", labels=_LABELS
        ),
        GaugeMetricFamily(
            "kafka_log_log_numlogsegments", "Segments of the log (Kafka Log.NumLogSegments)", labels=_LABELS
        ),
        GaugeMetricFamily(
            "kafka_log_log_logstartoffset", "The log start offset (Kafka Log.LogStartOffset)", labels=_LABELS
        ),
        GaugeMetricFamily(
            "kafka_log_log_logendoffset", "The log end offset (Kafka Log.LogEndOffset)", labels=_LABELS
        ),
        GaugeMetricFamily(
            "logcleaner_retention_future_timestamp_segments",
            "Segments time retention keeps because their largest timestamp is in the future "
            "(explain reason future-timestamp); partitions without any have no series",
            labels=_LABELS,
        ),
    )


class PartitionCollector(Collector):
    def __init__(self, source: MetricsSource) -> None:
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return _families()

    def collect(self) -> Iterable[Metric]:
        families = _families()
        size, count, start, end, future = (f.samples for f in families)
        size_name, count_name, start_name, end_name, future_name = (f.name for f in families)
        manager = self._source.log_manager
        now_ms = manager.clock.now_ms()
        cleaner_enabled = manager.settings.cleaner_enabled
        for tp, log in manager.logs.items():
            labels = {"topic": tp.topic, "partition": str(tp.partition)}
            with log.lock:  # one consistent reading of the log
                segments = log.segments
                size.append(Sample(size_name, labels, log.size_bytes))
                count.append(Sample(count_name, labels, len(segments)))
                start.append(Sample(start_name, labels, log.log_start_offset))
                end.append(Sample(end_name, labels, log.log_end_offset))
                try:
                    held = count_future_timestamp_segments(
                        log, segments, now_ms=now_ms, cleaner_enabled=cleaner_enabled
                    )
                except (OSError, LogCleanerError) as exc:  # one unreadable index must not fail the scrape
                    logger.warning("Cannot read the timestamps of %s for the metrics: %s", tp, exc)
                    continue
            if held:
                future.append(Sample(future_name, labels, held))
        return families

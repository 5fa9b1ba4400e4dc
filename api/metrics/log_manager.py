"""The LogManager's figures at scrape time: offline log dirs (Kafka ``kafka.log:type=LogManager``), the
segments retention has deleted since start-up, by reason, the partitions that failed to load, the topics
held for unknown configs, and the fetches that met corrupt data or passed missing offsets (counted by the
API itself: ``api.fetch.FetchFaults``)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.fetch import FETCH_CORRUPT_BATCH, FETCH_MISSING_RANGE, FetchFaults
from api.metrics.source import MetricsSource
from service.core.retention import RetentionReason

__all__ = ["LogManagerCollector"]

# Every deleting reason is exported from the start, at 0, so that rate() sees the first deletion.
_DELETE_REASONS = tuple(
    str(r) for r in (RetentionReason.LOG_START_OFFSET, RetentionReason.SIZE, RetentionReason.TIME)
)


_FetchFamilies = tuple[GaugeMetricFamily, GaugeMetricFamily, CounterMetricFamily, GaugeMetricFamily]


def _load_and_fetch_families() -> _FetchFamilies:
    return (
        GaugeMetricFamily(
            "logcleaner_partitions_failed_to_load",
            "Partitions left out at start-up because loading their dir failed (GET /v1/logs/failed says why)",
        ),
        GaugeMetricFamily(
            "logcleaner_stray_replicas",
            "Stray replicas found at start-up, left alone (GET /v1/logs/stray says why)",
        ),
        CounterMetricFamily(
            "logcleaner_fetch_faults",
            "Fetches that stopped at corrupt data (corrupt-batch) or passed offsets missing from a log that "
            "is not compacted (missing-range)",
            labels=("kind",),
        ),
        GaugeMetricFamily(
            "logcleaner_topics_with_unknown_configs",
            "Topics whose configs are unknown (a broker's dir without its metadata log), left alone by "
            "retention and the cleaner until imported (logcleaner topic-config --import) or set",
        ),
    )


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily, CounterMetricFamily]:
    return (
        GaugeMetricFamily(
            "kafka_log_logmanager_offlinelogdirectorycount",
            "Log dirs taken offline after an I/O error (Kafka LogManager.OfflineLogDirectoryCount)",
        ),
        GaugeMetricFamily(
            "kafka_log_logmanager_logdirectoryoffline",
            "1 if the log dir is offline, else 0 (Kafka LogManager.LogDirectoryOffline)",
            labels=("logDirectory",),
        ),
        CounterMetricFamily(
            "logcleaner_retention_deleted_segments_total",
            "Segments deleted by retention since start-up, by reason (log-start-offset, size, time)",
            labels=("reason",),
        ),
    )


class LogManagerCollector(Collector):
    def __init__(self, source: MetricsSource, fetch_faults: FetchFaults) -> None:
        self._source = source
        self._fetch_faults = fetch_faults

    def describe(self) -> Iterable[Metric]:
        return (*_families(), *_load_and_fetch_families())

    def collect(self) -> Iterable[Metric]:
        offline_count, offline, deleted = families = _families()
        manager = self._source.log_manager
        offline_dirs = manager.offline_dirs
        offline_count.add_metric([], len(offline_dirs))
        for log_dir in manager.log_dirs:
            offline.add_metric([str(log_dir)], 1 if log_dir in offline_dirs else 0)
        deletions = manager.retention_deletions
        for reason in sorted(set(_DELETE_REASONS) | deletions.keys()):
            deleted.add_metric([reason], deletions[reason])
        failed, strays, fetch_faults, unknown_configs = more = _load_and_fetch_families()
        failed.add_metric([], len(manager.failed_partitions))
        strays.add_metric([], len(manager.stray_replicas))
        unknown_configs.add_metric([], len(manager.topics_with_unknown_configs()))
        faults = self._fetch_faults.counts()
        for kind in sorted({FETCH_CORRUPT_BATCH, FETCH_MISSING_RANGE} | faults.keys()):
            fetch_faults.add_metric([kind], faults[kind])
        return (*families, *more)

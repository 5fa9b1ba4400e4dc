"""Start-up loading progress at scrape time: the API listens while the logs load, so a dashboard shows a
long recovery (``logcleaner_logs_loaded`` rising towards ``logcleaner_logs_to_load``)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.metrics.source import MetricsSource

__all__ = ["LoadingCollector"]


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    return (
        GaugeMetricFamily("logcleaner_logs_loaded", "Logs loaded (and recovered) since start-up"),
        GaugeMetricFamily("logcleaner_logs_to_load", "Logs found in the log dirs listed so far at start-up"),
    )


class LoadingCollector(Collector):
    def __init__(self, source: MetricsSource) -> None:
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return _families()

    def collect(self) -> Iterable[Metric]:
        loaded_family, to_load_family = _families()
        loaded, to_load = self._source.log_manager.load_progress.counts
        loaded_family.add_metric((), loaded)
        to_load_family.add_metric((), to_load)
        return loaded_family, to_load_family

"""The whole-broker summary's figures at scrape time: bytes held by reason and bytes reclaimable.

They come from the document the daemon keeps ready (``service.core.summary_cache``, refreshed by its scheduled
task), never from a walk of the logs: a scrape costs the same at any partition count. Before the first
refresh there are no samples. ``logcleaner_bytes_reclaimable{by="compaction"}`` is estimated (from key
sketches) and counts only the compacted logs already sketched.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.metrics.source import MetricsSource

__all__ = ["SummaryCollector"]


def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
    return (
        GaugeMetricFamily(
            "logcleaner_bytes_held",
            "Bytes of the partition dirs' segments by the reason they are still on disk "
            "(docs/bytes-held.md); they add up to every segment's bytes",
            labels=("reason",),
        ),
        GaugeMetricFamily(
            "logcleaner_bytes_reclaimable",
            "Bytes a retention pass would delete now (by=retention, exact) and that cleaning every compacted "
            "log now would free (by=compaction, estimated)",
            labels=("by",),
        ),
    )


class SummaryCollector(Collector):
    def __init__(self, source: MetricsSource) -> None:
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return _families()

    def collect(self) -> Iterable[Metric]:
        held, reclaimable = families = _families()
        document = self._source.explain_summary.latest()
        if document is None:
            return families
        entries = document.get("held")
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict):
                held.add_metric([str(entry["reason"])], float(entry["bytes"]))
        figures = document.get("reclaimable")
        if isinstance(figures, dict):
            reclaimable.add_metric(["retention"], float(figures["retention_now"]))
            reclaimable.add_metric(["compaction"], float(figures["compaction"]))
        return families

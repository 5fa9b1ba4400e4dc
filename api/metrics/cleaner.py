"""The log cleaner's gauges (Kafka ``kafka.log:type=LogCleaner`` and ``type=LogCleanerManager``) and our
byte totals, from ``CleanerView.figures()`` at scrape time.

Like Kafka's, these exist from start-up; without a cleaner (``log.cleaner.enable=false``) they hold
Kafka's idle values: 0, and no uncleanable partitions in any online log dir.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from api.metrics.source import MetricsSource
from service.core.ports import CleanerFigures

__all__ = ["IDLE_FIGURES", "CleanerCollector"]

IDLE_FIGURES = CleanerFigures(
    threads=0,
    dead_thread_count=0,
    max_buffer_utilization_percent=0.0,
    cleaner_recopy_percent=0,
    max_clean_time_secs=0.0,
    max_compaction_delay_secs=0,
    max_dirty_percent=0,
    time_since_last_run_ms=0,
)

_Read = Callable[[CleanerFigures], float]

# (name, help, figure): Kafka's gauges with no labels, in Kafka's units.
_GAUGES: tuple[tuple[str, str, _Read], ...] = (
    (
        "kafka_log_logcleaner_max_buffer_utilization_percent",
        "Max over cleaner threads of the dedupe buffer's fill in their last cleaning, percent",
        lambda f: f.max_buffer_utilization_percent,
    ),
    (
        "kafka_log_logcleaner_cleaner_recopy_percent",
        "100 x bytes written / bytes read over the threads' last cleanings",
        lambda f: f.cleaner_recopy_percent,
    ),
    (
        "kafka_log_logcleaner_max_clean_time_secs",
        "Max over cleaner threads of their last cleaning's duration, seconds",
        lambda f: f.max_clean_time_secs,
    ),
    (
        "kafka_log_logcleaner_max_compaction_delay_secs",
        "Max over cleaner threads of how far past max.compaction.lag.ms their last log was, seconds",
        lambda f: f.max_compaction_delay_secs,
    ),
    (
        "kafka_log_logcleaner_deadthreadcount",
        "Cleaner threads dead now after an unexpected error (each is restarted after log.cleaner.backoff.ms)",
        lambda f: f.dead_thread_count,
    ),
    (
        "logcleaner_cleaner_threads",
        "Cleaner threads configured (log.cleaner.threads; 0 without a cleaner)",
        lambda f: f.threads,
    ),
    (
        "kafka_log_logcleanermanager_max_dirty_percent",
        "100 x the highest cleanable ratio seen in the last selection of a log to clean",
        lambda f: f.max_dirty_percent,
    ),
    (
        "kafka_log_logcleanermanager_time_since_last_run_ms",
        "Milliseconds since the cleaner last selected a log to clean",
        lambda f: f.time_since_last_run_ms,
    ),
)

_DIR = ("logDirectory",)


def _families(
    figures: CleanerFigures | None, uncleanable: dict[Path, tuple[int, int]] | None = None
) -> list[Metric]:
    """The families; with ``figures``, their samples too (without, for ``describe``)."""
    families: list[Metric] = [
        GaugeMetricFamily(name, doc, value=None if figures is None else read(figures))
        for name, doc, read in _GAUGES
    ]
    count = GaugeMetricFamily(
        "kafka_log_logcleanermanager_uncleanable_partitions_count",
        "Partitions of the log dir the cleaner gave up on after an unexpected error (until their retry)",
        labels=_DIR,
    )
    size = GaugeMetricFamily(
        "kafka_log_logcleanermanager_uncleanable_bytes",
        "Cleanable bytes of the log dir's uncleanable partitions",
        labels=_DIR,
    )
    for log_dir, (partitions, cleanable_bytes) in sorted((uncleanable or {}).items()):
        count.add_metric([str(log_dir)], partitions)
        size.add_metric([str(log_dir)], cleanable_bytes)
    past_retry = GaugeMetricFamily(
        "logcleaner_cleaner_uncleanable_partitions_past_retry",
        "Uncleanable partitions whose retry (log.cleaner.uncleanable.retry.backoff.ms) is due but not yet "
        "taken by a cleaner thread",
        value=None if figures is None else sum(figures.uncleanable_past_retry.values()),
    )
    read_total = written_total = restarts = spilled = None
    rounds = CounterMetricFamily(
        "logcleaner_cleaner_rounds",
        "Cleaning rounds since start-up, by the engine that ran them",
        labels=["engine"],
    )
    engine_bytes = CounterMetricFamily(
        "logcleaner_cleaner_engine_bytes_read",
        "Bytes the cleaner read since start-up, by the engine that read them",
        labels=["engine"],
    )
    if figures is not None:
        read_total, written_total = figures.bytes_read_total, figures.bytes_written_total
        restarts = figures.thread_restarts
        spilled = figures.rounds_spilled_total
        for engine in ("in-process", "spark"):
            rounds.add_metric([engine], figures.rounds_by_engine.get(engine, 0))
            engine_bytes.add_metric([engine], figures.bytes_read_by_engine.get(engine, 0))
    families += [
        count,
        size,
        past_retry,
        CounterMetricFamily(
            "logcleaner_cleaner_thread_restarts_total",
            "Cleaner threads restarted after they died, since start-up",
            value=restarts,
        ),
        CounterMetricFamily(
            "logcleaner_cleaner_rounds_spilled_total",
            "Cleaning rounds whose key map passed its thread's share of log.cleaner.dedupe.buffer.size and "
            "spilled to disk (exact and whole all the same), since start-up",
            value=spilled,
        ),
        CounterMetricFamily(
            "logcleaner_cleaner_bytes_read_total", "Bytes the cleaner read since start-up", value=read_total
        ),
        CounterMetricFamily(
            "logcleaner_cleaner_bytes_written_total",
            "Bytes the cleaner wrote since start-up",
            value=written_total,
        ),
        rounds,
        engine_bytes,
    ]
    return families


class CleanerCollector(Collector):
    def __init__(self, source: MetricsSource) -> None:
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return _families(None)

    def collect(self) -> Iterable[Metric]:
        view = self._source.cleaner_view
        figures = IDLE_FIGURES if view is None else view.figures()
        return _families(figures, self._uncleanable(figures))

    def _uncleanable(self, figures: CleanerFigures) -> dict[Path, tuple[int, int]]:
        """Every online log dir (0 where nothing is uncleanable), and any dir the cleaner names."""
        manager = self._source.log_manager
        offline = manager.offline_dirs
        by_dir = {log_dir: (0, 0) for log_dir in manager.log_dirs if log_dir not in offline}
        by_dir.update(figures.uncleanable)
        return by_dir

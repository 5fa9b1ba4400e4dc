"""Shared by the metrics and deployment tests: the golden list of metric names, a daemon that runs no
task by itself, a parsed scrape, and promtool (the real binary, never skipped)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from service.base.clock import Clock, ManualClock
from service.config.broker_config import BrokerConfig
from service.shell.daemon import Daemon
from service.storage.records import Record

__all__ = [
    "CONTRACT_NAMES",
    "CONTRACT_NAME_EXCEPTIONS",
    "Scrape",
    "busy_scrape",
    "promtool",
    "running_daemon",
    "take_offline",
]

# The metric names of docs/metrics.md as exposed: counters with their _total, histograms by their family name.
CONTRACT_NAMES = (
    "kafka_log_log_size",
    "kafka_log_log_numlogsegments",
    "kafka_log_log_logstartoffset",
    "kafka_log_log_logendoffset",
    "kafka_log_logcleaner_max_buffer_utilization_percent",
    "kafka_log_logcleaner_cleaner_recopy_percent",
    "kafka_log_logcleaner_max_clean_time_secs",
    "kafka_log_logcleaner_max_compaction_delay_secs",
    "kafka_log_logcleaner_deadthreadcount",
    "kafka_log_logcleanermanager_max_dirty_percent",
    "kafka_log_logcleanermanager_time_since_last_run_ms",
    "kafka_log_logcleanermanager_uncleanable_partitions_count",
    "kafka_log_logcleanermanager_uncleanable_bytes",
    "kafka_log_logmanager_offlinelogdirectorycount",
    "logcleaner_retention_deleted_segments_total",
    "logcleaner_retention_future_timestamp_segments",
    "logcleaner_scheduler_job_runs_total",
    "logcleaner_scheduler_job_duration_seconds",
    "logcleaner_cleaner_bytes_read_total",
    "logcleaner_cleaner_bytes_written_total",
    "logcleaner_spark_job_duration_seconds",
    "logcleaner_cleaner_thread_restarts_total",
    "logcleaner_cleaner_rounds_spilled_total",
    "logcleaner_bytes_held",
    "logcleaner_bytes_reclaimable",
)

# promtool's lint findings that Kafka's names (kept exact, so Kafka dashboards work) cannot avoid.
CONTRACT_NAME_EXCEPTIONS = frozenset(
    {
        "kafka_log_logcleanermanager_time_since_last_run_ms metric names should not contain "
        "abbreviated units",
        "kafka_log_logcleanermanager_uncleanable_partitions_count non-histogram and non-summary metrics "
        'should not have "_count" suffix',
        "kafka_log_logcleanermanager_uncleanable_partitions_count label names should be written in "
        "'snake_case' not 'camelCase'",
        "kafka_log_logcleanermanager_uncleanable_bytes label names should be written in 'snake_case' "
        "not 'camelCase'",
        "kafka_log_logmanager_logdirectoryoffline label names should be written in 'snake_case' "
        "not 'camelCase'",
    }
)

# No scheduled task runs by itself; no cleaner thread; Spark stays out of it; the API on any free port.
QUIET = {
    "api.port": "0",
    "scheduler.initial.delay.ms": "3600000",
    "log.cleaner.engine": "in-process",
    "log.cleaner.threads": "0",
}


@contextmanager
def running_daemon(
    log_dirs: Sequence[Path], overrides: Mapping[str, str] | None = None, *, clock: Clock | None = None
) -> Iterator[Daemon]:
    """A started daemon over ``log_dirs`` (``QUIET`` plus ``overrides``), shut down afterwards."""
    properties = {"log.dirs": ",".join(str(d) for d in log_dirs), **QUIET, **(overrides or {})}
    broker, _ = BrokerConfig.from_properties(properties)
    daemon = Daemon(broker, clock=clock)
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.shutdown()


Labels = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Scrape:
    """One scrape, parsed back from the text format as Prometheus reads it."""

    text: str
    values: dict[str, dict[Labels, float]]  # sample name → labels → value
    types: dict[str, str]  # family name → type

    @classmethod
    def of(cls, registry: CollectorRegistry) -> Scrape:
        return cls.parse(generate_latest(registry).decode())

    @classmethod
    def parse(cls, text: str) -> Scrape:
        values: dict[str, dict[Labels, float]] = {}
        types: dict[str, str] = {}
        for family in text_string_to_metric_families(text):
            types[family.name] = family.type
            for sample in family.samples:
                values.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
        return cls(text, values, types)

    def value(self, name: str, **labels: str) -> float | None:
        """The sample ``name`` with exactly these labels, or None if the scrape has none."""
        return self.values.get(name, {}).get(frozenset(labels.items()))

    def series(self, name: str) -> dict[Labels, float]:
        return self.values.get(name, {})

    @property
    def names(self) -> set[str]:
        """Every sample name (``x_total``, ``x_bucket``, …) and every family name."""
        return set(self.values) | set(self.types)


def busy_scrape(log_dir: Path) -> Scrape:
    """A scrape in which every family has samples: a log with a segment stamped a day ahead, a compacted
    log, a partition on a log dir gone offline, a Spark job, a cleaning round and a run of a scheduled
    task."""
    clock = ManualClock()
    online, failing = log_dir / "online", log_dir / "failing"
    with running_daemon([online, failing], {"log.segment.bytes": "100"}, clock=clock) as daemon:
        manager = daemon.log_manager
        [log] = manager.create_topic("orders", 1)
        for timestamp in (clock.now_ms() + 86_400_000, clock.now_ms()):
            log.append_records([Record(0, timestamp, None, b"value")])  # one segment each
        [doomed] = manager.create_topic("doomed", 1)  # the other dir: each goes to the emptiest
        daemon.topic_store.update("profiles", {"cleanup.policy": "compact"})
        manager.create_topic("profiles", 1)
        daemon.refresh_topic_configs()
        Scrape.of(daemon.metrics_registry)  # the partition is seen online first
        take_offline(daemon, doomed.directory.parent)
        daemon.metrics.observe_spark_job(2.5)
        daemon.metrics.observe_cleaner_round("spark", 3.0)
        daemon.metrics.on_job_outcome("kafka-log-retention", "success", 0.25)
        daemon.view.summary.refresh()  # the scheduled task's run: the summary's figures
        return Scrape.of(daemon.metrics_registry)


def take_offline(daemon: Daemon, log_dir: Path) -> None:
    """Take ``log_dir`` offline as a failed disk does: its next checkpoint fails with an I/O error."""
    shutil.move(log_dir, log_dir.with_name(log_dir.name + "-gone"))
    log_dir.write_text("not a directory")
    daemon.log_manager.checkpoint_recovery_points()
    assert log_dir in daemon.log_manager.offline_dirs, daemon.log_manager.offline_dirs


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real promtool; its absence fails the test (CI installs it), it never skips."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(
            "promtool is not on PATH: install Debian's prometheus package (apt-get install -y prometheus), "
            "as .ci/run does, or put the promtool of Prometheus' release tarball on PATH (docs/operations.md)"
        )
    return subprocess.run(
        [path, *args], input=stdin, capture_output=True, text=True, timeout=120, check=False
    )

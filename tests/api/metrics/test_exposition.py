"""``/metrics`` over real HTTP: OpenMetrics when the scraper asks for it (as Prometheus does), the text
format otherwise, the same series in both; process, platform and build metrics; no ``_created`` series;
per-partition lines written directly that match the registry's own samples; one scrape at a time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from api.metrics.exposition import ExpositionRegistry, expose
from service.base.clock import ManualClock
from service.core.version import package_version
from service.storage.records import Record
from tests.api.conftest import Served, string_record
from tests.api.metrics_helpers import Labels, Scrape, running_daemon, take_offline

# What Prometheus 2.42 sends.
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
# Figures of the process that move between two scrapes.
MOVING = ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes")


def openmetrics_values(text: str) -> dict[str, dict[Labels, float]]:
    values: dict[str, dict[Labels, float]] = {}
    for family in parse_openmetrics(text):  # type: ignore[no-untyped-call]  # prometheus_client: no hints
        for sample in family.samples:
            values.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    return values


def test_openmetrics_when_the_scraper_asks_for_it_text_otherwise(served: Served, topic: str) -> None:
    records = {"records": [string_record("k", "v")]}
    assert served.client.post(f"/v1/topics/{topic}/partitions/0/records", json=records).status_code == 200

    openmetrics = served.client.get("/metrics", headers={"Accept": PROMETHEUS_ACCEPT})
    text = served.client.get("/metrics")

    assert openmetrics.status_code == text.status_code == 200
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    assert openmetrics.text.endswith("# EOF\n") and openmetrics.text.count("# EOF") == 1
    assert text.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "# EOF" not in text.text
    om_values = openmetrics_values(openmetrics.text)  # the strict parser: a format error raises
    text_values = Scrape.parse(text.text).values
    assert om_values.keys() == text_values.keys()
    for name in om_values.keys() - set(MOVING):
        assert om_values[name].keys() == text_values[name].keys(), name
    labels = frozenset({("topic", topic), ("partition", "0")})
    end_offset = "kafka_log_log_logendoffset"
    assert om_values[end_offset][labels] == text_values[end_offset][labels] == 1


def test_process_platform_and_build_metrics_and_no_created_series(served: Served) -> None:
    scrape = Scrape.parse(served.client.get("/metrics").text)

    assert scrape.value("logcleaner_build_info", version=package_version()) == 1
    assert len(scrape.series("logcleaner_build_info")) == 1
    open_fds, max_fds = scrape.value("process_open_fds"), scrape.value("process_max_fds")
    assert open_fds is not None and max_fds is not None and 0 < open_fds < max_fds
    assert (scrape.value("process_resident_memory_bytes") or 0) > 0
    assert [labels for labels in scrape.series("python_info")]
    assert [name for name in scrape.names if name.endswith("_created")] == []


def test_the_direct_partition_lines_are_the_registrys_samples(tmp_path: Path) -> None:
    clock = ManualClock()
    now = clock.now_ms()
    overrides = {"log.segment.bytes": "100", "log.retention.ms": "3600000"}
    with running_daemon([tmp_path / "a", tmp_path / "b"], overrides, clock=clock) as daemon:
        manager = daemon.log_manager
        daemon.topic_store.update("profiles", {"cleanup.policy": "compact"})
        logs = [*manager.create_topic("orders", 3), *manager.create_topic("profiles", 2)]
        for n, log in enumerate(logs):
            for timestamp in (now + 86_400_000 * (n % 2), now):  # some a day ahead
                log.append_records([Record(0, timestamp, b"key", b"value")])
        offline_dir = logs[0].directory.parent
        Scrape.of(daemon.metrics_registry)
        take_offline(daemon, offline_dir)
        clock.advance(60_000)

        direct = Scrape.parse(expose(daemon.metrics_registry, None)[0].decode())
        samples = Scrape.of(daemon.metrics_registry)

    for name in set(MOVING):
        direct.values.pop(name, None)
        samples.values.pop(name, None)
    assert direct.values == samples.values
    assert direct.types == samples.types
    # each partition to the emptier dir: a holds orders-0, orders-2 and profiles-1
    assert set(direct.series("logcleaner_partition_offline")) == {
        frozenset({("topic", t), ("partition", p)})
        for t, p in [("orders", "0"), ("orders", "2"), ("profiles", "1")]
    }
    assert set(direct.series("logcleaner_retention_future_timestamp_segments")) == {
        frozenset({("topic", "orders"), ("partition", "1")})
    }
    # both compacted partitions cleanable since the first scrape, the offline one too
    assert set(direct.series("logcleaner_cleaner_compaction_delay_seconds").values()) == {60.0}
    assert len(direct.series("logcleaner_cleaner_compaction_delay_seconds")) == 2


class Gate:
    """A collector whose collect() waits until the test opens the gate, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.entered = threading.Event()
        self.opened = threading.Event()

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily("gate_renders", "Renders so far")]

    def collect(self) -> Iterable[Metric]:
        self.calls += 1
        self.entered.set()
        assert self.opened.wait(30)
        return [GaugeMetricFamily("gate_renders", "Renders so far", value=self.calls)]


def wait_until(condition: threading.Event | None = None, *, check: object = None) -> None:
    deadline = time.monotonic() + 30
    while not (condition.is_set() if condition is not None else callable(check) and check()):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_scrape_during_another_waits_for_its_result_and_formats_take_turns() -> None:
    registry = ExpositionRegistry()
    gate = Gate()
    registry.register(gate)

    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(expose, registry, None)
        wait_until(gate.entered)
        second = pool.submit(expose, registry, None)
        wait_until(check=lambda: registry.coalescer.waiting("text/plain; version=0.0.4; charset=utf-8") == 1)
        other_format = pool.submit(expose, registry, PROMETHEUS_ACCEPT)
        assert gate.calls == 1 and not second.done() and not other_format.done()
        gate.opened.set()
        bodies = [first.result(30), second.result(30)]
        openmetrics = other_format.result(30)

    assert bodies[0] == bodies[1] and b"gate_renders 1.0" in bodies[0][0]
    assert b"gate_renders 2.0" in openmetrics[0]  # after the first, not beside it
    assert gate.calls == 2

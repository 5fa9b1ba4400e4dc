"""Metrics benchmark (issue 5): one ``/metrics`` scrape of a daemon holding 10,000 partitions.

Run on demand (not part of CI's pass/fail), from the repository root:

    python -m tests.benchmarks.bench_metrics [--partitions 10000] [--segments 10]

It builds, under a temporary folder removed at the end, the log dir of the LogManager benchmark (a clean
shutdown's state: ``--partitions`` partitions of ``--segments`` segments, real timestamps), starts a real
``Daemon`` over it (in-process cleaner, scheduled tasks held back) and times ``generate_latest`` of the
daemon's registry, which is all a scrape does:

- the first scrape after start-up, which reads the last time-index entry of every sealed segment not read
  yet (for the future-timestamp gauge);
- the steady state (median of several scrapes; target ≤ 250 ms), split into collecting (our collectors
  reading the live logs) and rendering (prometheus_client's text format);
- against a baseline measured in the same run: ``generate_latest`` of a registry holding as many plain,
  pre-set ``Gauge`` samples with the same names and labels — the cost of the text format alone.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.samples import Sample

from service.config.broker_config import BrokerConfig
from service.shell.daemon import Daemon
from tests.benchmarks.bench_log_manager import build_log_dir

SCRAPES = 7
TARGET_S = 0.250


def median_s(action: Callable[[], object], runs: int = SCRAPES) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def baseline_registry(registry: CollectorRegistry) -> CollectorRegistry:
    """Plain pre-set Gauges holding the very samples ``registry`` exposes (names, labels, values)."""
    groups: dict[tuple[str, tuple[str, ...]], list[Sample]] = {}
    for metric in registry.collect():
        for sample in metric.samples:
            groups.setdefault((sample.name, tuple(sorted(sample.labels))), []).append(sample)
    baseline = CollectorRegistry()
    for n, ((name, label_names), samples) in enumerate(groups.items()):
        gauge = Gauge(f"baseline_{n}_{name}", "baseline", label_names, registry=baseline)
        for sample in samples:
            (gauge.labels(**sample.labels) if label_names else gauge).set(sample.value)
    return baseline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--segments", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="logcleaner-bench-metrics-") as tmp:
        log_dir = build_log_dir(Path(tmp), args.partitions, args.segments)
        broker, _ = BrokerConfig.from_properties(
            {
                "log.dirs": str(log_dir),
                "log.retention.ms": str(60 * 24 * 3_600_000),
                "log.cleaner.engine": "in-process",
                "scheduler.initial.delay.ms": "3600000",  # no task runs during the measurement
                "api.port": "0",  # any free port
            }
        )
        daemon = Daemon(broker)
        start = time.perf_counter()
        daemon.start()
        print(f"start-up: {time.perf_counter() - start:.2f} s, {len(daemon.log_manager.logs)} logs")
        registry = daemon.metrics_registry
        try:
            start = time.perf_counter()
            body = generate_latest(registry)
            first_s = time.perf_counter() - start
            samples = sum(len(m.samples) for m in registry.collect())
            steady_s = median_s(lambda: generate_latest(registry))
            collect_s = median_s(lambda: list(registry.collect()))
            baseline = baseline_registry(registry)
            baseline_s = median_s(lambda: generate_latest(baseline))
        finally:
            daemon.shutdown()
    verdict = "✔" if steady_s <= TARGET_S else "✘"
    print(f"exposition: {samples} samples, {len(body) / 2**20:.1f} MiB")
    print(f"first scrape after start-up: {first_s * 1000:.0f} ms")
    print(
        f"steady scrape (median of {SCRAPES}): {steady_s * 1000:.0f} ms "
        f"(collect {collect_s * 1000:.0f} ms) — target ≤ {TARGET_S * 1000:.0f} ms {verdict}"
    )
    print(f"baseline, plain pre-set Gauges, same samples: {baseline_s * 1000:.0f} ms")
    print(f"ratio: {steady_s / baseline_s:.2f}× the baseline")


if __name__ == "__main__":
    main()

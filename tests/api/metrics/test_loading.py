"""``LoadingCollector``: the start-up progress (``logcleaner_logs_loaded`` of ``logcleaner_logs_to_load``) as
the LogManager counts it, read at each scrape, on a fresh registry over a real daemon's logs. (The figures
rising while a slow load runs, over HTTP, are in ``tests/service/shell/test_daemon.py``.)"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from api.metrics.loading import LoadingCollector
from tests.api.metrics_helpers import Scrape, running_daemon


def test_the_counts_are_the_logs_found_and_loaded(tmp_path: Path) -> None:
    with running_daemon([tmp_path]) as daemon:
        daemon.log_manager.create_topic("orders", 3)
    with running_daemon([tmp_path]) as daemon:  # a restart loads the three
        registry = CollectorRegistry()
        collector = LoadingCollector(daemon.view)
        registry.register(collector)
        scrape = Scrape.of(registry)
        daemon.log_manager.create_topic("later", 1)  # created, not loaded: the start-up counts stay
        later = Scrape.of(registry)

    assert (scrape.value("logcleaner_logs_loaded"), scrape.value("logcleaner_logs_to_load")) == (3, 3)
    assert (later.value("logcleaner_logs_loaded"), later.value("logcleaner_logs_to_load")) == (3, 3)
    assert [family.name for family in collector.describe()] == [
        "logcleaner_logs_loaded",
        "logcleaner_logs_to_load",
    ]

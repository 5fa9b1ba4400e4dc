"""``logcleaner_build_info``: one series, 1, labelled with the release (the installed one by default), on a
fresh registry: the series the alert rules and the dashboard pick this service's targets by."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from api.metrics.build_info import build_info
from service.core.version import package_version
from tests.api.metrics_helpers import Scrape


def scrape_of(release: str | None) -> Scrape:
    registry = CollectorRegistry()
    registry.register(build_info(release))
    return Scrape.of(registry)


def test_one_series_at_1_labelled_with_the_release() -> None:
    scrape = scrape_of("1.2.3")

    assert scrape.series("logcleaner_build_info") == {frozenset({("version", "1.2.3")}): 1.0}
    assert scrape.types["logcleaner_build_info"] == "gauge"


def test_the_installed_release_by_default() -> None:
    assert scrape_of(None).series("logcleaner_build_info") == {
        frozenset({("version", package_version())}): 1.0
    }

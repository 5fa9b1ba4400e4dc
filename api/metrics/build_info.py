"""``logcleaner_build_info{version}``: 1, on every scrape of this service and of nothing else.

Besides telling which version runs, it is the label set the alert rules and the dashboard join on to pick
this service's targets out of everything a Prometheus server scrapes (a Kafka broker exports the same
``kafka_log_*`` names, but never this one).
"""

from __future__ import annotations

from prometheus_client import Gauge

from service.core.version import package_version

__all__ = ["build_info"]


def build_info(release: str | None = None) -> Gauge:
    """The gauge, unregistered, set to 1 for ``release`` (the installed version by default)."""
    gauge = Gauge(
        "logcleaner_build_info",
        "Always 1; the version label is the logcleaner release that serves these metrics",
        ("version",),
        registry=None,
    )
    gauge.labels(release or package_version()).set(1)
    return gauge

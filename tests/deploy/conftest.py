"""The metric names a real daemon exports, for checking the dashboards and alert rules against them."""

from __future__ import annotations

import pytest

from tests.api.metrics_helpers import busy_scrape


@pytest.fixture(scope="module")
def exported_names(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every sample name (``x``, ``x_total``, ``x_bucket``, …) a running daemon's collectors emit: what a
    query can read."""
    return set(busy_scrape(tmp_path_factory.mktemp("logs")).values)

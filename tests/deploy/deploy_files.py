"""Reading the files under ``deploy/``: YAML documents and the example configurations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # PyYAML ships no hints; types-PyYAML is not a dev dependency

from service.config.broker_config import BrokerConfig
from service.config.properties import read_properties
from tests.paths import DEPLOY

__all__ = ["DEPLOY", "PROMETHEUS_SERIES", "broker_config", "load_yaml"]


# Series Prometheus makes itself for every target.
PROMETHEUS_SERIES = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped"})


def load_yaml(path: Path) -> Any:
    """The document in ``path`` (PyYAML comes with the dev dependencies, through schemathesis)."""
    return yaml.safe_load(path.read_text())


def broker_config(path: Path) -> tuple[BrokerConfig, list[str]]:
    """The configuration in ``path``, as ``logcleaner serve --config`` reads it, and its warnings."""
    return BrokerConfig.from_properties(read_properties(path))

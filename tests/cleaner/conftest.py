"""Fixtures for the cleaner tests: a manual clock (the only fake) and a fresh partition dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.clock import ManualClock

START_MS = 1_400_000_000_000  # LogCleanerTest's start time


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"

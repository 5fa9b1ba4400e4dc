"""Fixtures for every test."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _collector_unfrozen() -> Iterator[None]:
    """A command run in-process (``serve``, an inspection) freezes what is alive at its end out of the cyclic
    collector's view (``collector_paused(freeze=True)``), as its own process would for the rest of its
    life. A test process runs hundreds of them: each test's leftovers go back to the collector after it,
    so that the next test's garbage cycles are collected as usual."""
    yield
    if gc.get_freeze_count():
        gc.unfreeze()

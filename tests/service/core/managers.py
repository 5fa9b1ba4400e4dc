"""LogManagers over real log dirs for the core's tests, each released (its dir locks) when the test ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from service.base.clock import ManualClock
from service.core.log_manager import LogManager, LogManagerSettings
from service.core.tasks import ManualTaskScheduler
from service.storage.log_config import LogConfig

MakeManager = Callable[..., LogManager]


@contextmanager
def manager_factory(clock: ManualClock, config_for: Callable[[str], LogConfig]) -> Iterator[MakeManager]:
    """``make(*log_dirs, **settings)``: a started LogManager (``LogManagerSettings(**settings)``) on
    ``clock``, its tasks run by hand; every one made is released on exit."""
    managers: list[LogManager] = []

    def make(*log_dirs: Path, **settings: Any) -> LogManager:
        manager = LogManager(
            list(log_dirs),
            config_for,
            clock=clock,
            scheduler=ManualTaskScheduler(clock),
            settings=LogManagerSettings(**settings),
        )
        managers.append(manager)
        manager.startup()
        return manager

    try:
        yield make
    finally:
        for manager in managers:
            manager.release_locks()

"""The seams between the core and the outer packages (``typing.Protocol``s).

The API reaches the cleaner and the scheduler only through these, injected by the composition root.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["TaskScheduler"]


class TaskScheduler(Protocol):
    """Runs ``task`` once, ``delay_ms`` from now (Kafka's ``scheduler.scheduleOnce``)."""

    def schedule_once(self, name: str, delay_ms: int, task: Callable[[], None]) -> None: ...

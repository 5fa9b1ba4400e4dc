"""One-shot delayed tasks (Kafka's ``scheduler.scheduleOnce``) without a live scheduler.

The daemon schedules them on APScheduler (``scheduler/``); offline commands and tests use these:
``DeferredTasks`` runs everything at the end of an offline command (``logcleaner retention`` removes
``.deleted`` files before it exits), ``ManualTaskScheduler`` runs tasks as a manual clock passes their
due time (Kafka's ``MockScheduler``).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable

from service.base.clock import ManualClock

__all__ = ["DeferredTasks", "ManualTaskScheduler"]


class DeferredTasks:
    """Collects tasks; ``run_all`` runs them in order whatever their delay. ``_lock`` guards ``_tasks``."""

    def __init__(self) -> None:
        self._tasks: list[tuple[str, Callable[[], None]]] = []
        self._lock = threading.Lock()

    def schedule_once(self, name: str, delay_ms: int, task: Callable[[], None]) -> None:
        with self._lock:
            self._tasks.append((name, task))

    def run_all(self) -> int:
        with self._lock:
            tasks, self._tasks = self._tasks, []
        for _name, task in tasks:
            task()
        return len(tasks)


class ManualTaskScheduler:
    """Runs each task once ``clock`` reaches its due time, when ``tick`` is called (e.g. after advancing)."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self._queue: list[tuple[int, int, str, Callable[[], None]]] = []
        self._sequence = itertools.count()

    def schedule_once(self, name: str, delay_ms: int, task: Callable[[], None]) -> None:
        heapq.heappush(
            self._queue, (self.clock.now_ms() + max(delay_ms, 0), next(self._sequence), name, task)
        )

    def tick(self) -> int:
        ran = 0
        while self._queue and self._queue[0][0] <= self.clock.now_ms():
            _due, _seq, _name, task = heapq.heappop(self._queue)
            task()
            ran += 1
        return ran

    def advance(self, delta_ms: int) -> int:
        """Advance the clock and run what fell due (Kafka's ``MockTime.sleep``)."""
        self.clock.advance(delta_ms)
        return self.tick()

    @property
    def pending(self) -> int:
        return len(self._queue)

"""``LoadProgress``: how many logs start-up has found and loaded so far, read by ``/readyz`` and the metrics.

Loading and recovery can take minutes; the API listens meanwhile and reports this progress. The loader
threads count; scrapes and requests read. ``_lock`` guards both counts.
"""

from __future__ import annotations

import threading

__all__ = ["LoadProgress"]


class LoadProgress:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._to_load = 0
        self._loaded = 0

    def found(self, count: int) -> None:
        """``count`` more logs are to be loaded (one log dir listed)."""
        with self._lock:
            self._to_load += count

    def loaded_one(self) -> None:
        with self._lock:
            self._loaded += 1

    @property
    def counts(self) -> tuple[int, int]:
        """``(loaded, to_load)`` at one moment."""
        with self._lock:
            return self._loaded, self._to_load

    def describe(self) -> str:
        """``loading: 1,234 of 10,000 logs``."""
        loaded, to_load = self.counts
        return f"loading: {loaded:,} of {to_load:,} logs"

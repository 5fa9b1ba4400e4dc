"""I/O throttling to ``log.cleaner.io.max.bytes.per.second`` (Kafka ``Throttler``), shared by all workers.

Bytes are counted over a check interval; when the observed rate is above the limit, the caller sleeps
until the rate falls back to it. ``_lock`` guards the window's counters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Throttler"]


class Throttler:
    def __init__(
        self,
        max_bytes_per_second: float,
        *,
        check_interval_s: float = 0.3,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.max_bytes_per_second = max_bytes_per_second
        self.check_interval_s = check_interval_s
        self._monotonic = monotonic
        self._sleep = sleep
        self._lock = threading.Lock()
        self._window_start = monotonic()
        self._window_bytes = 0
        self.total_throttled_s = 0.0

    @property
    def is_unlimited(self) -> bool:
        return self.max_bytes_per_second >= 1.7e308 or self.max_bytes_per_second <= 0

    def maybe_throttle(self, observed_bytes: int) -> None:
        if self.is_unlimited:
            return
        with self._lock:
            self._window_bytes += observed_bytes
            now = self._monotonic()
            elapsed = now - self._window_start
            if elapsed < self.check_interval_s:
                return
            rate = self._window_bytes / elapsed
            pause = (
                self._window_bytes / self.max_bytes_per_second - elapsed
                if rate > self.max_bytes_per_second
                else 0
            )
            self._window_start, self._window_bytes = now, 0
        if pause > 0:
            self.total_throttled_s += pause
            self._sleep(pause)
            with self._lock:
                self._window_start = self._monotonic()

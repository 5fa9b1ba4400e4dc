"""The I/O throttler, with time injected (the only fake)."""

from __future__ import annotations

from cleaner.pool.throttler import Throttler


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_sleeps_enough_to_bring_the_rate_down_to_the_limit() -> None:
    time = FakeTime()
    throttler = Throttler(1000.0, check_interval_s=0.1, monotonic=time.monotonic, sleep=time.sleep)
    time.now = 0.5
    throttler.maybe_throttle(2000)  # 2000 bytes in 0.5 s: 4000 B/s, four times the limit
    assert time.slept == [1.5]  # 2000 bytes at 1000 B/s take 2 s; 0.5 s already passed
    assert throttler.total_throttled_s == 1.5


def test_no_sleep_below_the_limit_or_within_the_interval() -> None:
    time = FakeTime()
    throttler = Throttler(1000.0, check_interval_s=1.0, monotonic=time.monotonic, sleep=time.sleep)
    time.now = 0.5
    throttler.maybe_throttle(10_000)  # inside the check interval: not measured yet
    time.now = 20.0
    throttler.maybe_throttle(0)  # 10 000 bytes over 20 s: 500 B/s
    assert time.slept == []


def test_kafkas_default_is_unlimited() -> None:
    time = FakeTime()
    throttler = Throttler(1.7976931348623157e308, monotonic=time.monotonic, sleep=time.sleep)
    time.now = 10.0
    throttler.maybe_throttle(10**12)
    assert throttler.is_unlimited and time.slept == []

"""``clock``: the wall clock in ms since the epoch and a monotonic one that never goes back, and the manual
clock tests use instead (Kafka's ``MockTime``), which moves only when told, both readings together."""

from __future__ import annotations

import time

from service.base.clock import Clock, ManualClock, SystemClock


def test_the_system_clock_reads_the_wall_clock_in_ms() -> None:
    clock: Clock = SystemClock()
    before = time.time_ns() // 1_000_000
    now = clock.now_ms()
    assert before <= now <= time.time_ns() // 1_000_000


def test_the_monotonic_clock_never_goes_back() -> None:
    clock = SystemClock()
    readings = [clock.monotonic_ms() for _ in range(1000)]
    assert readings == sorted(readings)


def test_the_manual_clock_moves_only_when_told() -> None:
    clock: Clock = ManualClock(1_000)
    assert (clock.now_ms(), clock.monotonic_ms()) == (1_000, 1_000)
    assert isinstance(clock, ManualClock)
    clock.advance(250)
    assert (clock.now_ms(), clock.monotonic_ms()) == (1_250, 1_250)
    assert ManualClock().now_ms() == 1_700_000_000_000, "a fixed default start"

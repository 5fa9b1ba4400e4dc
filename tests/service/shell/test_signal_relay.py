"""``SignalRelay``: a stop signal reaches the daemon on the relay's thread, so a signal that lands while
the main thread holds the stop event's lock (waiting on it, as ``serve``'s main loop does) cannot hang
the stop."""

from __future__ import annotations

import os
import signal
import threading

from service.shell.signal_relay import SignalRelay


def test_the_handler_returns_while_the_main_thread_holds_the_lock_its_action_takes() -> None:
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        stop.set()  # takes the event's lock: on the main thread, inside wait(), this never returned

    relay = SignalRelay(on_signal)
    with stop._cond:  # type: ignore[attr-defined]  # where Event.wait holds it: the handler still returns
        relay.handler(signal.SIGTERM, None)
        assert not stop.is_set()
    assert stop.wait(timeout=10)
    assert received == [signal.SIGTERM]


def test_real_signals_are_relayed_in_order() -> None:
    received: list[int] = []
    both = threading.Event()

    def on_signal(signum: int) -> None:
        received.append(signum)
        if len(received) == 2:
            both.set()

    relay = SignalRelay(on_signal)
    previous = signal.getsignal(signal.SIGUSR1), signal.getsignal(signal.SIGUSR2)
    relay.install(signal.SIGUSR1, signal.SIGUSR2)
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR2)
        assert both.wait(timeout=10)
    finally:
        signal.signal(signal.SIGUSR1, previous[0])
        signal.signal(signal.SIGUSR2, previous[1])
    assert received == [signal.SIGUSR1, signal.SIGUSR2]


def test_a_failing_action_leaves_the_relay_running() -> None:
    received: list[int] = []
    second = threading.Event()

    def on_signal(signum: int) -> None:
        received.append(signum)
        if len(received) == 1:
            raise RuntimeError("the first action fails")
        second.set()

    relay = SignalRelay(on_signal)
    relay.handler(signal.SIGTERM, None)
    relay.handler(signal.SIGINT, None)
    assert second.wait(timeout=10)
    assert received == [signal.SIGTERM, signal.SIGINT]

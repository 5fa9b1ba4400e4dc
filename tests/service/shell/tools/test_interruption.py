"""``interruptible``: inside it, SIGINT and SIGTERM (sent for real, to this process) are recorded and
``on_signal`` asked to stop the work, once, instead of a ``KeyboardInterrupt`` mid-swap or death; the
previous handlers are back after it, however it ends."""

from __future__ import annotations

import os
import signal

import pytest

from service.shell.tools.interruption import Interruption, interruptible


def send(signum: int) -> None:
    """Deliver ``signum`` to this process; the handler runs on the main thread before ``os.kill`` returns
    to Python code."""
    os.kill(os.getpid(), signum)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_is_recorded_and_asks_the_work_to_stop(signum: signal.Signals) -> None:
    stops: list[int] = []
    with interruptible() as interruption:
        interruption.on_signal = lambda: stops.append(1)
        send(signum)
        assert interruption.signum == signum
        assert interruption.signal_name == signum.name
    assert stops == [1]


def test_later_signals_are_ignored_while_the_stop_is_under_way() -> None:
    stops: list[int] = []
    with interruptible() as interruption:
        interruption.on_signal = lambda: stops.append(1)
        send(signal.SIGTERM)
        send(signal.SIGINT)
        send(signal.SIGTERM)
    assert (interruption.signum, stops) == (signal.SIGTERM, [1])


def test_without_a_signal_nothing_is_recorded() -> None:
    with interruptible() as interruption:
        pass
    assert interruption.signum is None and interruption.signal_name == "no signal"
    assert Interruption().signal_name == "no signal"


def test_a_signal_before_on_signal_is_set_is_still_recorded() -> None:
    with interruptible() as interruption:
        send(signal.SIGINT)
    assert interruption.signum == signal.SIGINT


def test_the_previous_handlers_are_restored_even_after_an_error() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(RuntimeError), interruptible():
        assert signal.getsignal(signal.SIGINT) is not before[signal.SIGINT]
        raise RuntimeError("the command failed")
    assert {s: signal.getsignal(s) for s in before} == before
    if before[signal.SIGINT] is signal.default_int_handler:
        with pytest.raises(KeyboardInterrupt):  # Python's SIGINT behaviour is back
            send(signal.SIGINT)

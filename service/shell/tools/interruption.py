"""SIGINT and SIGTERM during an offline command that changes the logs: a stop at the next safe point.

Python's default turns SIGINT into a ``KeyboardInterrupt`` wherever the main thread is (in the middle of
a swap, or of the close that writes the checkpoints and the clean-shutdown marker) and SIGTERM kills the
process outright. Inside ``interruptible`` both only record the signal and call ``on_signal`` (which asks
the work to stop at its next check, as Kafka's cleaner threads stop on shutdown); the command then
finishes what is in flight, closes the logs cleanly and raises ``InterruptedCommandError`` saying how far
it got.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

__all__ = ["Interruption", "interruptible"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(slots=True)
class Interruption:
    """Written by the signal handler, read by the command (both on the main thread)."""

    signum: int | None = None
    on_signal: Callable[[], None] | None = None

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else "no signal"


@contextmanager
def interruptible() -> Iterator[Interruption]:
    """Record the first SIGINT/SIGTERM (later ones are ignored: the stop is under way) instead of dying."""
    interruption = Interruption()

    def handle(signum: int, _frame: FrameType | None) -> None:
        if interruption.signum is None:
            interruption.signum = signum
            if interruption.on_signal is not None:
                interruption.on_signal()

    previous = {signum: signal.signal(signum, handle) for signum in _SIGNALS}
    try:
        yield interruption
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

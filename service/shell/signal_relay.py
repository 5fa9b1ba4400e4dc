"""Stop signals handed to a thread of their own: a signal handler must take no lock.

Python runs a signal handler on the main thread between two bytecodes, wherever that thread is: inside
``threading.Event.wait`` (``serve``'s main loop), its lock held, a handler that sets that event waits for
the lock forever, and the stop hangs. ``SignalRelay``'s handler only writes the signal's number to a pipe
(a system call, no lock); a daemon thread reads it and calls the daemon's ``request_stop``, which may take
whatever locks it needs.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["SignalRelay"]

logger = logging.getLogger(__name__)


class SignalRelay:
    """Relays each signal it handles to ``on_signal(signum)``, called on the relay's thread in order."""

    def __init__(self, on_signal: Callable[[int], None]) -> None:
        self._on_signal = on_signal
        self._read_end, self._write_end = os.pipe()
        self._thread = threading.Thread(target=self._relay, name="signal-relay", daemon=True)
        self._thread.start()

    def install(self, *signums: int) -> None:
        """Handle ``signums`` from now on (on the main thread, as ``signal.signal`` must be called)."""
        for signum in signums:
            signal.signal(signum, self.handler)

    def handler(self, signum: int, _frame: FrameType | None = None) -> None:
        """The signal handler: one byte into the pipe, nothing else."""
        os.write(self._write_end, bytes([signum]))

    def _relay(self) -> None:
        while True:
            data = os.read(self._read_end, 64)
            if not data:
                return
            for signum in data:
                try:
                    self._on_signal(signum)
                except Exception:
                    logger.exception("Acting on signal %d failed", signum)

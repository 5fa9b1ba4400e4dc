"""The long-running service: lock and load every log dir, run until SIGTERM/SIGINT, shut down cleanly.

Start-up locks each dir (a second instance fails), loads and recovers every partition, honouring and then
removing the clean-shutdown marker. Shutdown closes every log (final time-index entries, trimmed indexes),
writes both offset checkpoints and the clean-shutdown marker, so the next start skips recovery.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from service.clock import Clock, SystemClock
from service.storage.dir_lock import LogDirLock
from service.storage.log_config import LogConfig
from service.storage.log_dir import LoadedLogDir, close_log_dir, load_log_dir

__all__ = ["Daemon"]

logger = logging.getLogger(__name__)


class Daemon:
    """Owns the log dirs, their locks and the loaded logs. ``_stop`` is the only cross-thread state."""

    def __init__(
        self,
        log_dirs: list[Path],
        config_for: Callable[[str], LogConfig],
        *,
        clock: Clock | None = None,
        recovery_threads: int = 1,
    ) -> None:
        self.log_dirs = [p.resolve() for p in log_dirs]
        self.config_for = config_for
        self.clock = clock or SystemClock()
        self.recovery_threads = recovery_threads
        self.loaded: list[LoadedLogDir] = []
        self._locks: list[LogDirLock] = []
        self._stop = threading.Event()

    def start(self) -> None:
        for path in self.log_dirs:
            path.mkdir(parents=True, exist_ok=True)
            lock = LogDirLock(path)
            lock.acquire()
            self._locks.append(lock)
        for path in self.log_dirs:
            loaded = load_log_dir(path, self.config_for, clock=self.clock, threads=self.recovery_threads)
            logger.info(
                "Loaded %d logs from %s (clean shutdown: %s, recovered segments: %d, truncated bytes: %d)",
                len(loaded.logs),
                path,
                loaded.had_clean_shutdown,
                loaded.recovered_segments,
                loaded.truncated_bytes,
            )
            self.loaded.append(loaded)

    def request_stop(self, signum: int | None = None, _frame: FrameType | None = None) -> None:
        if signum is not None:
            logger.info("Received signal %d: shutting down", signum)
        self._stop.set()

    def run_until_stopped(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        while not self._stop.wait(timeout=1.0):
            pass

    def shutdown(self) -> None:
        for loaded in self.loaded:
            close_log_dir(loaded)
        for lock in self._locks:
            lock.release()
        logger.info("Shut down cleanly")

"""The exclusive lock on a log dir, so two processes never manage the same logs (Kafka ``FileLock``).

A Kafka broker locks ``<log dir>/.lock`` with Java's ``FileChannel.tryLock``, which on Linux is a POSIX
record lock (``fcntl(F_SETLK)``). ``flock`` locks are a separate mechanism on Linux and do not see those,
so :class:`LogDirLock` takes both:

- ``flock(LOCK_EX | LOCK_NB)``: belongs to the open file description, so it conflicts with any other
  open of the file, in another process or in this one;
- ``lockf(LOCK_EX | LOCK_NB)`` (a POSIX lock): conflicts with a running Kafka broker.

POSIX locks belong to the process, and closing *any* descriptor of the file drops them. A second
``LogDirLock`` on the same dir in this process therefore must not even open the lock file: a registry
of the dirs this process holds (keyed by device and inode, as Java's in-JVM ``FileLockTable`` does)
refuses it first. The lock file is never deleted, and the locks vanish with the process, so a crash
leaves nothing to clean up.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from pathlib import Path
from types import TracebackType

from service.base.errors import ConflictError
from service.storage.log_files import LOCK_FILE

__all__ = ["LogDirLock"]

# (st_dev, st_ino) of every log dir locked by this process; guarded by _HELD_GUARD.
_HELD: set[tuple[int, int]] = set()
_HELD_GUARD = threading.Lock()

# What a non-blocking flock/lockf raises when someone else holds the lock (POSIX allows both for lockf).
_LOCKED_ERRNOS = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES})


class LogDirLock:
    """Holds ``<log dir>/.lock`` exclusively between :meth:`acquire` and :meth:`release`.

    States: released (initial) → held (``acquire``) → released (``release``, idempotent); it may be
    acquired again. Use it as a context manager to hold it for a block. Not shared between threads:
    one owner (the log manager) acquires and releases it. The log dir must exist; an ``OSError`` from
    opening the lock file (permissions, a missing dir) propagates.
    """

    def __init__(self, log_dir: Path) -> None:
        self._log_dir = log_dir
        self._fd: int | None = None
        self._key: tuple[int, int] | None = None

    @property
    def log_dir(self) -> Path:
        return self._log_dir

    @property
    def lock_path(self) -> Path:
        return self._log_dir / LOCK_FILE

    @property
    def is_held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock now or raise ConflictError; never waits."""
        if self._fd is not None:
            raise ConflictError(f"log dir {self._log_dir} is already locked by this LogDirLock")
        stat = os.stat(self._log_dir)
        key = (stat.st_dev, stat.st_ino)
        with _HELD_GUARD:
            if key in _HELD:
                raise ConflictError(
                    f"log dir {self._log_dir} is already locked by this process; "
                    "each log dir may be opened only once"
                )
            self._fd = self._lock_file()
            self._key = key
            _HELD.add(key)

    def release(self) -> None:
        """Drop the lock; a no-op when it is not held."""
        fd, key = self._fd, self._key
        if fd is None or key is None:
            return
        with _HELD_GUARD:
            self._fd = self._key = None
            _HELD.discard(key)
            try:
                # Unlock explicitly: a child forked meanwhile shares the descriptor, and closing only
                # our copy would leave the flock held until the child exits.
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)  # also drops the POSIX lock

    def _lock_file(self) -> int:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in _LOCKED_ERRNOS:
                raise
            raise ConflictError(
                f"log dir {self._log_dir} is locked ({self.lock_path}): another logcleaner or a Kafka "
                "broker is using it. Stop that process first, or use a different log dir."
            ) from exc
        except BaseException:  # KeyboardInterrupt and the like: do not leak the descriptor
            os.close(fd)
            raise
        return fd

    def __enter__(self) -> LogDirLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "held" if self.is_held else "released"
        return f"LogDirLock({str(self._log_dir)!r}, {state})"

"""Crash-safe replacement of many small files with two file-system syncs in all, not two fsyncs each.

:func:`service.storage.atomic.write_atomically` pays an ``fsync`` of the file and one of its directory per
file: 10,000 leader-epoch checkpoints took 10,000 × 2 syncs (3–5 s). :class:`AtomicBatch` keeps each file's
protocol (new content durable before it is renamed over the old) and shares the syncs among all of them:

1. ``stage``: each file's data is written to ``<path>.tmp`` (created or truncated), without a sync.
   *Kill:* each ``path`` still holds its old content; ``.tmp`` files may be partial (nothing reads them;
   the next write of the same path truncates and reuses its ``.tmp``, as with ``write_atomically``).
2. ``sync``: one ``syncfs`` per file system holding staged files (``os.sync`` where ``syncfs`` is missing)
   makes every staged ``.tmp`` durable. *Kill or power loss:* as after step 1.
3. ``commit``: each ``.tmp`` is renamed over its path, one at a time. *Kill part-way:* the paths renamed
   hold the new content, the others the old, each a complete file (its data was durable before its
   rename). *Power loss before step 4:* a rename may be undone, leaving that path's old content.
4. ``finish``: one more ``syncfs`` makes the renames durable.

A failed ``stage`` concerns its file alone (the caller decides); a failed ``sync`` ends the batch before
any rename (``abandon`` removes the staged ``.tmp`` files). Files may be staged and committed from
several threads at once (``_lock`` guards the batch's bookkeeping); the callers serialise writes of the
same path (each file's owner stages and commits under its own lock).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from service.storage.atomic import TMP_SUFFIX

__all__ = ["AtomicBatch", "sync_file_system", "write_atomically_many"]

_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC


class AtomicBatch:
    """The four steps of the module docstring over any number of files."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._staged: set[Path] = set()  # paths whose .tmp is written and not yet renamed or removed
        self._file_systems: dict[int, Path] = {}  # st_dev -> a dir on it, one syncfs each
        self._committed = 0

    def __len__(self) -> int:
        return len(self._staged)

    def stage(self, path: Path, data: bytes) -> None:
        """Step 1 for one file: ``data`` into ``<path>.tmp``, not synced (a failure removes the .tmp)."""
        tmp = _tmp(path)
        try:
            fd = os.open(tmp, _FILE_FLAGS, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                device = os.fstat(fd).st_dev
            finally:
                os.close(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise
        with self._lock:
            self._staged.add(path)
            self._file_systems.setdefault(device, path.parent)

    def sync(self) -> None:
        """Step 2: every staged ``.tmp`` durable, one sync per file system. On failure, call ``abandon``."""
        for directory in self._file_systems.values():
            sync_file_system(directory)

    def commit(self, path: Path) -> None:
        """Step 3 for one staged file: its ``.tmp`` renamed over ``path`` (call only after ``sync``)."""
        with self._lock:
            self._staged.remove(path)
        os.replace(_tmp(path), path)
        with self._lock:
            self._committed += 1

    def discard(self, path: Path) -> None:
        """Drop one staged file: its ``.tmp`` removed, ``path`` left as it is (a newer write won)."""
        with self._lock:
            self._staged.discard(path)
        _tmp(path).unlink(missing_ok=True)

    def abandon(self) -> None:
        """Drop every file still staged (after a failed ``sync``): the paths keep their old content."""
        with self._lock:
            staged = list(self._staged)
        for path in staged:
            with contextlib.suppress(OSError):
                self.discard(path)

    def finish(self) -> None:
        """Step 4: the renames durable, one sync per file system (none if nothing was committed)."""
        if self._committed:
            for directory in self._file_systems.values():
                sync_file_system(directory)
        self._committed = 0


def write_atomically_many(files: Mapping[Path, bytes]) -> None:
    """Replace each path's content with its bytes, crash-safely, in one batch (a failure raises; paths
    already renamed keep their new content, the others their old)."""
    batch = AtomicBatch()
    try:
        for path, data in files.items():
            batch.stage(path, data)
        batch.sync()
    except BaseException:
        batch.abandon()
        raise
    for path in files:
        batch.commit(path)
    batch.finish()


def sync_file_system(directory: Path) -> None:
    """Write back everything the file system holding ``directory`` has dirty, and wait for it (Linux
    ``syncfs``; ``os.sync``, every file system, where ``syncfs`` cannot be called)."""
    syncfs = _syncfs()
    if syncfs is None:  # pragma: no cover - glibc and musl on Linux have syncfs
        os.sync()
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if syncfs(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"syncfs failed: {os.strerror(error)}", str(directory))
    finally:
        os.close(fd)


def _tmp(path: Path) -> Path:
    return path.with_name(path.name + TMP_SUFFIX)


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs  # the C library the interpreter links
    except (OSError, AttributeError):  # pragma: no cover - not Linux, or a libc without syncfs
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return function

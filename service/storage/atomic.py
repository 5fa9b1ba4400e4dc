"""Crash-safe file replacement: the one helper every rewritten file goes through.

Kafka writes checkpoints, the clean-shutdown marker and other small files the same way
(``CheckpointFile.write`` + ``Utils.atomicMoveWithFallback`` + ``Utils.flushDir``). The protocol of
:func:`write_atomically`, and what a crash at each step leaves behind:

1. Open ``<path>.tmp`` in the same directory (created, or truncated if a stale one is there) and write
   the data. *Crash:* a partial ``.tmp``; ``path`` still holds its old content (or is still absent).
2. Flush and ``fsync`` the ``.tmp`` file. *Crash:* the same; the ``.tmp`` may be empty or partial.
3. ``os.replace`` the ``.tmp`` over ``path``. The rename is atomic in the namespace, so a reader sees
   the complete old file or the complete new one, never a mix. *Crash before the directory is synced:*
   after power loss the directory may still show the old ``path`` (and the ``.tmp``) or already the
   new ``path``; both are complete files, because the data was synced in step 2 before the rename.
4. ``fsync`` the directory, making the rename itself durable. Only when this returns is the new
   content guaranteed to survive a crash.

A stale ``.tmp`` is harmless: nothing reads ``.tmp`` files, and the next write to the same path
truncates and reuses it. If a step fails (disk full, I/O error) the ``.tmp`` is removed and the error
is re-raised; ``path`` is untouched unless the failure was the final directory sync.

Two writers of the same path at once would share one ``.tmp``; callers serialise their writes (the
checkpoint owner holds a lock, as Kafka's ``CheckpointFile`` does).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from pathlib import Path

__all__ = ["TMP_SUFFIX", "fsync_dir", "fsync_file", "rename_durably", "write_atomically"]

logger = logging.getLogger(__name__)

TMP_SUFFIX = ".tmp"

# Errors that mean "this file system cannot sync a directory", not "the sync failed": some network and
# FUSE file systems reject fsync on a directory fd. An EIO here is a real failure and is raised.
_DIR_FSYNC_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EISDIR})


def fsync_dir(path: Path) -> None:
    """Make the entries of directory ``path`` (creations, renames, deletions) durable.

    A no-op on Windows, where a directory cannot be opened for syncing (Kafka skips it there too).
    """
    if os.name == "nt":  # pragma: no cover - Linux is the supported platform
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _DIR_FSYNC_UNSUPPORTED:
            raise
        logger.debug("file system of %s cannot fsync a directory (%s); skipped", path, exc)
    finally:
        os.close(fd)


def fsync_file(path: str) -> None:
    """fsync a file through a descriptor opened for the call.

    Linux syncs a file's dirty pages whichever descriptor wrote them, so a writer need not keep its
    descriptor open until the flush; this is how segments and indexes hold none while they wait for one.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rename_durably(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst`` (replacing it) and sync the directories so the rename survives a crash.

    Both parents are synced when they differ: the new entry must be durable, and so must the removal of
    the old one, or a crash could leave the file under both names.
    """
    os.replace(src, dst)
    fsync_dir(dst.parent)
    if src.parent.resolve() != dst.parent.resolve():
        fsync_dir(src.parent)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace the content of ``path`` with ``data`` crash-safely (steps in the module docstring)."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)

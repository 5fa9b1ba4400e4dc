"""Read-only loads of log dirs for the inspection commands (``explain``, ``retention --dry-run``).

An inspection must write nothing into a log dir a broker or a daemon owns: no lock, no clean-shutdown
marker, no checkpoint, no index, no truncated segment, and no created dir. Yet loading a log runs Kafka's
start-up steps (recovery after an unclean stop, completing swaps, rebuilding indexes), which write.

So the LogManager loads read-only (``LogManager(read_only=...)``): after a clean stop a healthy partition
is read in place, since no start-up step writes to it then; a partition whose load would write (recovery,
a swap or cleaning left over, an index to rebuild) is loaded from a scratch copy of its dir instead, which
:class:`ScratchCopies` makes. In a copy every small file (indexes, snapshots, checkpoints) is copied, a
``.log`` file that loading may rewrite is copied, and every other ``.log`` is a symbolic link to the
original, which loading only reads. After an unclean stop every ``.log`` is copied, because recovery may
truncate any; otherwise only the active segment and a segment whose indexes are missing or malformed are
(Kafka's check rebuilds those). What the command reports is what the real start-up would find, since it
ran those same steps.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from service.base.errors import InvalidInputError, NotFoundError
from service.storage.log_files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, parse_partition_dir_name

__all__ = ["ScratchCopies", "require_log_dirs", "scratch_copies"]

logger = logging.getLogger(__name__)

_ENTRY_BYTES = {INDEX_SUFFIX: 8, TIME_INDEX_SUFFIX: 12}  # Kafka's offset and time index entry sizes


def check_log_dir_paths(log_dirs: Iterable[Path]) -> None:
    """Every command's first check of ``log.dirs``: a path that exists must be a dir this process can list
    and enter (bad input, exit 2, naming it), not a file, before anything reads or creates it."""
    for path in log_dirs:
        if path.exists() and not path.is_dir():
            raise InvalidInputError(f"log dir {path} is a file, not a directory (log.dirs)")
        if path.is_dir() and not os.access(path, os.R_OK | os.X_OK):
            raise InvalidInputError(
                f"log dir {path} cannot be read by this user: permission denied (log.dirs)"
            )


def require_log_dirs(log_dirs: list[Path]) -> None:
    """An offline command never creates a log dir: a missing one is bad input (exit 2), named."""
    for path in log_dirs:
        if not path.is_dir():
            raise NotFoundError(
                f"log dir {path} does not exist (log.dirs); only 'logcleaner serve' creates missing log dirs"
            )


class ScratchCopies:
    """Copies of the partition dirs a read-only load would write into, under one scratch folder.

    Each copy sits in its own folder (``<scratch>/<n>/<partition dir name>``), so that partitions of the
    same name in two log dirs do not meet; :meth:`original_log_dir` maps a copy's parent back. ``share``:
    the partition dir names the inspection reads (None: every one), for an inspection split over processes.
    """

    def __init__(self, scratch: Path, share: frozenset[str] | None = None) -> None:
        self._scratch = scratch
        self._share = share
        self._originals: dict[Path, Path] = {}  # copy's parent → the original's log dir
        self._topics: frozenset[str] | None = None  # of the share's dirs, once asked

    def selects(self, name: str) -> bool:
        return self._share is None or name in self._share

    def surveys(self, topic: str) -> bool:
        if self._share is None:
            return True
        if self._topics is None:
            self._topics = frozenset(parse_partition_dir_name(name).topic for name in self._share)
        return topic in self._topics

    @property
    def copied(self) -> int:
        """How many partition dirs were copied."""
        return len(self._originals)

    def copy(self, directory: Path, *, every_log: bool) -> Path:
        parent = self._scratch / str(len(self._originals))
        parent.mkdir()
        self._originals[parent] = directory.parent
        target = parent / directory.name
        _copy_partition_dir(directory, target, every_log=every_log)
        return target

    def original_log_dir(self, log_dir: Path) -> Path:
        """The log dir a loaded partition belongs to (``log_dir`` itself unless it is a copy's parent)."""
        return self._originals.get(log_dir, log_dir)

    def originals_named(self, message: str) -> str:
        """``message`` with each copy's folder replaced by the original log dir."""
        for parent, original in self._originals.items():
            message = message.replace(str(parent), str(original))
        return message


@contextmanager
def scratch_copies(share: frozenset[str] | None = None) -> Iterator[ScratchCopies]:
    """A :class:`ScratchCopies` whose folder is removed on exit. Meanwhile every log line that names a copy
    (a torn tail truncated in it, say) names the operator's own file instead, and says nothing changed."""
    with tempfile.TemporaryDirectory(prefix="logcleaner-read-only-") as scratch:
        copies = ScratchCopies(Path(scratch), share)
        renaming = _CopiesRenamed(scratch, copies)
        handlers = logging.getLogger().handlers
        for handler in handlers:
            handler.addFilter(renaming)
        try:
            yield copies
        finally:
            for handler in handlers:
                handler.removeFilter(renaming)


class _CopiesRenamed(logging.Filter):
    """Rewrites a record that names a scratch copy: the original's path, and that nothing was changed."""

    def __init__(self, scratch: str, copies: ScratchCopies) -> None:
        super().__init__()
        self._scratch = scratch
        self._copies = copies

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self._scratch in message:
            record.msg = self._copies.originals_named(message) + f" ({_NOTHING_CHANGED})"
            record.args = None
        return True


_NOTHING_CHANGED = "in a read-only copy: nothing in the log dir was changed"


def _copy_partition_dir(original: Path, target: Path, *, every_log: bool) -> None:
    target.mkdir()
    names = {entry.name for entry in _entries(original) if entry.is_file(follow_symlinks=False)}
    logs = sorted(name for name in names if name.endswith(LOG_SUFFIX))
    active = logs[-1] if logs else None
    for name in names:
        source, copy = original / name, target / name
        if name.endswith(LOG_SUFFIX) and not (
            every_log or name == active or not _indexes_pass_kafka_check(original, name, names)
        ):
            copy.symlink_to(source)  # read only: loading neither truncates nor rewrites this one
        else:  # small files, swaps and cleaned files (loading completes or removes them), logs it may rewrite
            _copy(source, copy)


def _indexes_pass_kafka_check(directory: Path, log_name: str, names: set[str]) -> bool:
    """Kafka's light check after a clean stop: both indexes exist and hold whole entries."""
    stem = log_name[: -len(LOG_SUFFIX)]
    for suffix, entry_bytes in _ENTRY_BYTES.items():
        name = stem + suffix
        if name not in names:
            return False
        try:
            if (directory / name).stat().st_size % entry_bytes:
                return False
        except FileNotFoundError:
            return False
    return True


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    with os.scandir(directory) as entries:
        return list(entries)


def _copy(source: Path, target: Path) -> None:
    try:
        shutil.copyfile(source, target)
    except FileNotFoundError:  # removed by a running daemon meanwhile (a deleted segment): not there
        logger.debug("%s disappeared while it was read", source)

"""Read-only views of log dirs for the inspection commands (``explain``, ``retention --dry-run``).

An inspection must write nothing into a log dir a broker or a daemon owns: no lock, no clean-shutdown
marker, no checkpoint, no index, no truncated segment, and no created dir. Yet loading a log runs Kafka's
start-up steps (recovery after an unclean stop, completing swaps, rebuilding indexes), which write.

So the LogManager loads a *shadow* of each log dir in a temporary folder: the same names, where every
small file (checkpoints, indexes, markers, configs) is a copy, a ``.log`` file that loading may rewrite is
a copy, and every other ``.log`` file is a symbolic link to the original, which loading only reads. The
shadow takes its own lock, gets its own marker and checkpoints, and is removed afterwards. After an unclean
stop (no marker) every ``.log`` is copied, because recovery may truncate any of them; after a clean stop
only the active segment and a segment whose indexes are missing or malformed are (Kafka's check rebuilds
those), except in a partition the recovery-point checkpoint does not list, which loading recovers whole.
What the command reports is what the real start-up would find, since it ran those same steps.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from service.errors import CorruptDataError, NotFoundError
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log_files import (
    CLEAN_SHUTDOWN_FILE,
    INDEX_SUFFIX,
    LOCK_FILE,
    LOG_SUFFIX,
    RECOVERY_POINT_CHECKPOINT,
    TIME_INDEX_SUFFIX,
    partition_dir_name,
)

__all__ = ["require_log_dirs", "shadow_log_dirs"]

logger = logging.getLogger(__name__)

_ENTRY_BYTES = {INDEX_SUFFIX: 8, TIME_INDEX_SUFFIX: 12}  # Kafka's offset and time index entry sizes


def require_log_dirs(log_dirs: list[Path]) -> None:
    """An offline command never creates a log dir: a missing one is bad input (exit 2), named."""
    for path in log_dirs:
        if not path.is_dir():
            raise NotFoundError(
                f"log dir {path} does not exist (log.dirs); only 'logcleaner serve' creates missing log dirs"
            )


@contextmanager
def shadow_log_dirs(log_dirs: list[Path]) -> Iterator[dict[Path, Path]]:
    """Yield {shadow dir: original dir} for ``log_dirs``; the shadows are removed on exit."""
    require_log_dirs(log_dirs)
    with tempfile.TemporaryDirectory(prefix="logcleaner-read-only-") as scratch:
        shadows: dict[Path, Path] = {}
        for i, original in enumerate(log_dirs):
            shadow = Path(scratch) / str(i) / original.name
            _shadow_log_dir(original.resolve(), shadow)
            shadows[shadow] = original
        yield shadows


def _shadow_log_dir(original: Path, shadow: Path) -> None:
    shadow.mkdir(parents=True)
    clean = (original / CLEAN_SHUTDOWN_FILE).is_file()
    checkpointed = _checkpointed_partition_dirs(original) if clean else set()
    for entry in _entries(original):
        if entry.name == LOCK_FILE:
            continue
        if entry.is_dir(follow_symlinks=False):
            copy_every_log = entry.name not in checkpointed  # unclean, or recovered whole at load
            _shadow_partition_dir(Path(entry.path), shadow / entry.name, copy_every_log=copy_every_log)
        elif entry.is_file(follow_symlinks=False):
            _copy(Path(entry.path), shadow / entry.name)


def _checkpointed_partition_dirs(original: Path) -> set[str]:
    """The partition dir names the recovery-point checkpoint lists (none if it cannot be read, as loading
    then treats every partition as unclean)."""
    try:
        checkpoint = OffsetCheckpointFile(original / RECOVERY_POINT_CHECKPOINT).read()
    except (OSError, ValueError, CorruptDataError):
        return set()
    return {partition_dir_name(tp.topic, tp.partition) for tp in checkpoint}


def _shadow_partition_dir(original: Path, shadow: Path, *, copy_every_log: bool) -> None:
    shadow.mkdir()
    names = {entry.name for entry in _entries(original) if entry.is_file(follow_symlinks=False)}
    logs = sorted(name for name in names if name.endswith(LOG_SUFFIX))
    active = logs[-1] if logs else None
    for name in names:
        source, target = original / name, shadow / name
        if name.endswith(LOG_SUFFIX) and not (
            copy_every_log or name == active or not _indexes_pass_kafka_check(original, name, names)
        ):
            target.symlink_to(source)  # read only: loading neither truncates nor rewrites this one
        else:  # small files, swaps and cleaned files (loading completes or removes them), logs it may rewrite
            _copy(source, target)


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

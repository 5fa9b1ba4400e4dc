"""Steps 1 and 2 of a partition's load (``loader``): what an interrupted retention, cleaning or segment split
left in the dir, finished before its segments are read (Kafka ``LogLoader``'s
``removeTempFilesAndCollectSwapFiles`` and ``completeSwapOperations``).

1. Delete ``*.deleted`` files; delete ``*.swap`` files at or above the lowest ``*.cleaned`` base (an
   interrupted split); delete every ``*.cleaned`` file.
2. Complete interrupted swaps: the segments a ``.swap`` replaces (base offsets in the swaps' range) are
   deleted, then every ``.swap`` loses its suffix.

A read-only load deletes nothing: it goes on without the files step 1 would delete, and raises
``WouldWriteError`` where a swap is left to complete or discard.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from service.base.clock import Clock
from service.base.errors import WouldWriteError
from service.storage.atomic import fsync_dir
from service.storage.log_config import LogConfig
from service.storage.log_files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    segment_file_base_offset,
)
from service.storage.prescan import PartitionScan
from service.storage.segment import LogSegment

__all__ = ["finish_interrupted_operations"]

logger = logging.getLogger(__name__)

_SEGMENT_SUFFIXES = (LOG_SUFFIX, *INDEX_SUFFIXES)
_TEMP_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
_GONE_AT_LOAD = (DELETED_SUFFIX, CLEANED_SUFFIX)  # without a swap, step 1 only deletes these


def finish_interrupted_operations(
    directory: Path,
    names: list[str],
    scan: PartitionScan | None,
    config: LogConfig,
    clock: Clock,
    *,
    read_only: bool,
) -> tuple[PartitionScan | None, list[str]]:
    """Steps 1 and 2 (Kafka's ``removeTempFilesAndCollectSwapFiles`` and ``completeSwapOperations``), if a
    temporary file is left; the listing they leave. A scan whose shape has none has nothing to do."""
    if (scan is not None and scan.shape is not None) or not _has_temp_files(names):
        return scan, names  # after a clean shutdown, at most deletions are still pending
    if scan is not None:  # the steps below change the dir: nothing from the scan, as documented
        scan = None
        names = os.listdir(directory)
    if read_only:
        return scan, _names_a_load_keeps(directory, names)
    names = _remove_temp_files(directory, names)
    return scan, _complete_swaps(directory, names, config, clock)


def _names_a_load_keeps(directory: Path, names: list[str]) -> list[str]:
    """A read-only load's steps 1 and 2: without a ``.swap`` file, they only delete files (``.deleted``
    ones, left by retention and cleaning, and unfinished ``.cleaned`` ones), so the listing without them is
    what the load continues with; a swap to complete or discard would write."""
    if SWAP_SUFFIX + "\0" in "\0".join(names) + "\0":  # as in ``_has_temp_files``: one search
        raise WouldWriteError(f"{directory}: loading it completes or removes an interrupted swap")
    return [name for name in names if not name.endswith(_GONE_AT_LOAD)]


def _has_temp_files(names: list[str]) -> bool:
    """Whether a name ends in a temporary suffix: three substring searches over the joined listing (a
    name holds no NUL), not one ``endswith`` per file."""
    joined = "\0".join(names) + "\0"
    return any(suffix + "\0" in joined for suffix in _TEMP_SUFFIXES)


def _remove_temp_files(directory: Path, names: list[str]) -> list[str]:
    """Step 1; returns the dir's listing, listed again only if a file was deleted."""
    deleted = sorted(n for n in names if n.endswith(DELETED_SUFFIX))
    cleaned = sorted(n for n in names if n.endswith(CLEANED_SUFFIX))
    if not deleted and not cleaned:
        return names
    for name in deleted:
        (directory / name).unlink(missing_ok=True)
    min_cleaned = min((segment_file_base_offset(directory, n) for n in cleaned), default=None)
    if min_cleaned is not None:
        for name in sorted(n for n in names if n.endswith(SWAP_SUFFIX)):
            if segment_file_base_offset(directory, name) >= min_cleaned:
                logger.info("Deleting %s: a swap file left by an interrupted segment split", directory / name)
                (directory / name).unlink(missing_ok=True)
    for name in cleaned:
        logger.info("Deleting %s: a cleaning that did not finish", directory / name)
        (directory / name).unlink(missing_ok=True)
    return os.listdir(directory)


def _complete_swaps(directory: Path, names: list[str], config: LogConfig, clock: Clock) -> list[str]:
    """Step 2; returns the dir's listing, listed again only if a swap was completed."""
    swaps = [directory / n for n in sorted(names) if n.endswith(SWAP_SUFFIX)]
    if not swaps:
        return names
    log_swaps = [p for p in swaps if p.name.endswith(LOG_SUFFIX + SWAP_SUFFIX)]
    if not log_swaps:
        for path in swaps:  # index swaps whose .log was already renamed: finish the rename
            os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))
        return os.listdir(directory)
    ranges = []
    for path in log_swaps:
        base = segment_file_base_offset(directory, path.name)
        segment = LogSegment(directory, base, config=config, created_ms=clock.now_ms(), suffix=SWAP_SUFFIX)
        next_offset = base
        for batch in segment.batches():
            next_offset = batch.next_offset
        segment.close_file()
        ranges.append((base, next_offset))
    min_swap = min(base for base, _ in ranges)
    max_swap = max(end for _, end in ranges)
    for name in sorted(names):
        if name.endswith(SWAP_SUFFIX) or not name.endswith(_SEGMENT_SUFFIXES) or not name[:1].isdigit():
            continue
        if min_swap <= segment_file_base_offset(directory, name) < max_swap:
            logger.info("Deleting %s: replaced by a completed swap", directory / name)
            (directory / name).unlink()
    for path in swaps:
        os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))
    fsync_dir(directory)
    return os.listdir(directory)

"""Step 3 of a partition's load (``loader``): its segments in base-offset order, each one's index files
checked, and rebuilt where they fail (``WouldWriteError`` instead for a read-only load).

Which check a segment gets is ``load_segments``' to say. A prescan (``service.storage.prescan``) stands in
for the listing, the sizes and the active segment's index bytes of a clean load, and where it made every
check in C the segments are built from it alone (``segments_checked_in_c``).
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from service.base.clock import Clock
from service.base.errors import CorruptDataError, WouldWriteError
from service.storage.log_config import LogConfig
from service.storage.log_files import (
    INDEX_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    file_name,
    segment_file_base_offset,
)
from service.storage.prescan import PartitionScan
from service.storage.producer_state import ProducerStateManager
from service.storage.segment import LogSegment

__all__ = ["load_segments", "segments_checked_in_c"]

logger = logging.getLogger(__name__)


def segments_checked_in_c(
    directory: Path, scan: PartitionScan | None, config: LogConfig, clock: Clock, prefix: str
) -> tuple[list[LogSegment], int] | None:
    """A clean load's segments and log end offset from a scan that made in C every check of the active
    segment's bytes (``_dirscan.c``: a shape, those bytes read and passed, its end offset found), if each
    sealed segment's index files pass ``check_index_files`` too; None otherwise: the loader's steps, which
    repeat the checks, rebuild what fails them and report it. The segments are left as those steps leave
    them: sizes as listed, index files checked, time-index edges primed, indexes lazy."""
    if scan is None or scan.shape is None or scan.next_offset is None or scan.time_index is None:
        return None
    shape = scan.shape
    if not shape.log_bases or scan.active_stem != file_name(shape.log_bases[-1], ""):
        return None
    if any(size is None or size < 0 for size in shape.log_sizes):
        return None
    now_ms = clock.now_ms()  # the loaded segments' creation time (Kafka's ``LogSegment.open``)
    segments = [
        LogSegment(directory, base, config=config, created_ms=now_ms, size_bytes=size, dir_prefix=prefix)
        for base, size in zip(shape.log_bases, shape.log_sizes, strict=True)
    ]
    txn_bases = shape.txn_index_bases
    edges = shape.time_index_edges or _NOT_READ
    for segment, index_length, time_length, edge_bytes in zip(
        segments[:-1], shape.index_sizes, shape.time_index_sizes, edges, strict=False
    ):
        try:
            segment.check_index_files(
                has_txn_index=segment.base_offset in txn_bases, listed_lengths=(index_length, time_length)
            )
        except (FileNotFoundError, CorruptDataError):
            return None
        if edge_bytes is not None and time_length is not None:
            segment.prime_time_index_edges(time_length, edge_bytes)
    active, times = segments[-1], scan.time_index
    active.mark_index_files_clean()
    active.prime_time_index_edges(len(times), times if len(times) <= 24 else times[:12] + times[-12:])
    return segments, scan.next_offset


_NOT_READ = itertools.repeat(None)  # each sealed segment's time-index edges, for a scan that read none


def load_segments(
    directory: Path,
    names: list[str],
    config: LogConfig,
    now_ms: int,
    tracker: ProducerStateManager,
    *,
    clean_shutdown: bool,
    recovery_point: int = 0,
    read_only: bool = False,
    scan: PartitionScan | None = None,
    dir_prefix: str | None = None,
) -> tuple[list[LogSegment], dict[int, int]]:
    """Every segment in base-offset order; returns them and {base offset: bytes truncated} of rebuilt ones.

    A segment whose indexes fail their check is rebuilt. After a clean shutdown the check is Kafka's
    (``LogSegment.check_index_files``: stats, no entry read) for every segment but the active one, whose
    indexes are read whole anyway and get the full ``sanity_check``. After an unclean shutdown the
    segments below the one holding ``recovery_point`` get the full check, and those from it on none: the
    loader's step 4 rebuilds their indexes whatever they hold (Kafka's ``LogSegment.sanityCheck`` skips
    the index checks for the same reason). With ``scan`` (a clean load only) the sizes and the active
    segment's index bytes are the scan's, checked as the files would be (a scan that made every check in C
    and found the end offset does not come here: ``segments_checked_in_c``), and its ``shape``, if it has
    one, is what sorting out the names finds (no index without its log: nothing to delete).
    """
    if scan is not None and scan.shape is not None:
        log_bases, txn_bases = list(scan.shape.log_bases), set(scan.shape.txn_index_bases)
    else:
        log_bases, txn_bases = _sort_out_names(directory, names, read_only=read_only)
    return _segments_from(
        directory,
        log_bases,
        txn_bases,
        config,
        now_ms,
        tracker,
        recovered_from=None if clean_shutdown else first_recovered_base(log_bases, recovery_point),
        read_only=read_only,
        scan=scan,
        dir_prefix=dir_prefix,
    )


def first_recovered_base(log_bases: Iterable[int], recovery_point: int) -> int:
    """The base offset of the segment holding ``recovery_point``: after an unclean shutdown it and every
    later segment are recovered (the first segment if all begin above it)."""
    return max((base for base in log_bases if base <= recovery_point), default=0)


def _sort_out_names(directory: Path, names: list[str], *, read_only: bool) -> tuple[list[int], set[int]]:
    """The ``.log`` files' base offsets, sorted, and those with a ``.txnindex``; an index file without its
    ``.log`` is deleted (``WouldWriteError`` if ``read_only``)."""
    log_names: dict[str, str] = {}
    index_names = []
    for name in names:  # one pass: a listing holds a dozen names per segment
        if not name[:1].isdigit():
            continue
        if name.endswith(LOG_SUFFIX):
            log_names[name[: -len(LOG_SUFFIX)]] = name
        elif name.endswith(INDEX_SUFFIXES):
            index_names.append(name)
    log_bases = sorted(segment_file_base_offset(directory, n) for n in log_names.values())
    bases = set(log_bases)
    txn_bases = set()
    for name in index_names:
        stem = name.partition(".")[0]
        # Same name as a .log: no need to parse the offset (the common case, by far).
        base = -1 if stem in log_names else segment_file_base_offset(directory, name)
        if base != -1 and base not in bases:
            if read_only:
                raise WouldWriteError(f"{directory}: loading it deletes {name}, an index without a log file")
            logger.warning("Deleting %s: an index file without a log file", directory / name)
            (directory / name).unlink()
        elif name.endswith(TXN_INDEX_SUFFIX):
            txn_bases.add(segment_file_base_offset(directory, name))
    return log_bases, txn_bases


def _segments_from(
    directory: Path,
    log_bases: list[int],
    txn_bases: set[int],
    config: LogConfig,
    now_ms: int,
    tracker: ProducerStateManager,
    *,
    recovered_from: int | None,
    read_only: bool,
    scan: PartitionScan | None,
    dir_prefix: str | None,
) -> tuple[list[LogSegment], dict[int, int]]:
    """``load_segments`` once the names are sorted out; ``recovered_from``: after an unclean shutdown, see
    ``first_recovered_base`` (None after a clean one)."""
    segments = []
    rebuilt: dict[int, int] = {}
    last = log_bases[-1] if log_bases else None
    listed = _listed_sizes(scan, log_bases)
    edges = scan.shape.time_index_edges if scan is not None and scan.shape is not None else None
    prefix = os.path.join(directory, "") if dir_prefix is None else dir_prefix
    sizes = _UNLISTED if listed is None else listed  # as many as log_bases, or endless
    for n, (base, (log_size, index_length, time_length)) in enumerate(zip(log_bases, sizes, strict=False)):
        segment = LogSegment(
            directory,
            base,
            config=config,
            created_ms=now_ms,
            size_bytes=log_size if log_size is not None and log_size >= 0 else None,
            dir_prefix=prefix,
        )
        try:
            if recovered_from is not None:
                if base < recovered_from:
                    segment.sanity_check()
            elif base != last:
                segment.check_index_files(
                    has_txn_index=base in txn_bases,
                    listed_lengths=None if listed is None else (index_length, time_length),
                )
                edge_bytes = None if edges is None else edges[n]
                if edge_bytes is not None and time_length is not None:
                    segment.prime_time_index_edges(time_length, edge_bytes)
            elif scan is None or scan.active_stem != file_name(base, ""):  # read whole: its end offset next
                segment.sanity_check(has_txn_index=base in txn_bases, load_offset_index=True)
            else:
                segment.sanity_check(
                    has_txn_index=base in txn_bases,
                    load_offset_index=True,
                    offset_index_bytes=scan.offset_index,
                    time_index_bytes=scan.time_index,
                )
        except (FileNotFoundError, CorruptDataError) as exc:
            if read_only:
                raise WouldWriteError(
                    f"{directory}: loading it rebuilds the indexes of {base}: {exc}"
                ) from exc
            logger.warning("Rebuilding the indexes of %s: %s", segment.log_path, exc)
            rebuilt[base] = segment.recover(tracker.on_batch).truncated_bytes
        segments.append(segment)
    return segments, rebuilt


_UNLISTED = itertools.repeat((None, None, None))  # each segment's sizes without a scan


def _listed_sizes(
    scan: PartitionScan | None, log_bases: list[int]
) -> Iterable[tuple[int | None, int | None, int | None]] | None:
    """Each log base's ``.log``, ``.index`` and ``.timeindex`` sizes as ``scan`` listed them (None: not in
    the listing; -1: its stat failed), in order, for one pass; or None without a scan."""
    if scan is None:
        return None
    if scan.shape is not None:
        shape = scan.shape
        return zip(shape.log_sizes, shape.index_sizes, shape.time_index_sizes, strict=True)
    sizes = scan.sizes or {}
    listed = []
    for base in log_bases:
        stem = file_name(base, "")
        log_size = sizes.get(stem + LOG_SUFFIX)
        listed.append((log_size, sizes.get(stem + INDEX_SUFFIX), sizes.get(stem + TIME_INDEX_SUFFIX)))
    return listed

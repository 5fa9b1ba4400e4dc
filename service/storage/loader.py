"""Loading one partition dir, with Kafka's swap-file protocol and crash recovery (Kafka ``LogLoader``).

1. Delete ``*.deleted`` files; delete ``*.swap`` files at or above the lowest ``*.cleaned`` base (an
   interrupted split); delete every ``*.cleaned`` file.
2. Complete interrupted swaps: the segments a ``.swap`` replaces (base offsets in the swaps' range) are
   deleted, then every ``.swap`` loses its suffix.
3. Load segments in base-offset order; index files without a ``.log`` are deleted; a segment whose indexes
   are missing or fail their check is rebuilt now. After a clean shutdown the check is Kafka's (the offset
   index exists, both indexes hold whole entries: one ``os.stat`` each) for every segment but the active
   one; otherwise it is the full ``sanity_check``, which reads the indexes' first and last entries.
4. After an unclean shutdown, recover from the segment holding the recovery point: validate every batch,
   rebuild the indexes, truncate at the first invalid batch and delete every later segment.
5. A log whose end is below the checkpointed log start offset starts afresh, empty, at that offset.

A *read-only* load (the inspection commands) writes nothing: the broker files beside the segments are read
as they are (``load_partition_files``), and a step above that would write raises ``WouldWriteError``
naming it, so that the caller loads that partition from a copy instead. After a clean shutdown no step
writes, so a healthy partition is read in place.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from service.base.audit import audit_log, log_ident
from service.base.clock import Clock
from service.base.errors import CorruptDataError, InvalidInputError, UnsupportedFormatError, WouldWriteError
from service.base.wording import counted
from service.storage.atomic import fsync_dir
from service.storage.high_watermark_source import HighWatermarkSource
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.log_files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    INDEX_SUFFIXES,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    base_offset_from_name,
    file_name,
    parse_partition_dir_name,
)
from service.storage.partition_files import load_partition_files
from service.storage.prescan import PartitionScan
from service.storage.producer_state import ProducerStateManager
from service.storage.segment import LogSegment
from service.storage.topic_partition import TopicPartition

__all__ = ["LoadResult", "load_partition_log"]

logger = logging.getLogger(__name__)

_SEGMENT_SUFFIXES = (LOG_SUFFIX, *INDEX_SUFFIXES)
_TEMP_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
_GONE_AT_LOAD = (DELETED_SUFFIX, CLEANED_SUFFIX)  # without a swap, step 1 only deletes these


class LoadResult(NamedTuple):
    log: PartitionLog
    recovered_segments: int
    truncated_bytes: int


def load_partition_log(
    directory: Path,
    config: LogConfig,
    *,
    clock: Clock,
    log_start_offset: int = 0,
    recovery_point: int = 0,
    clean_shutdown: bool = False,
    read_only: bool = False,
    topic_partition: TopicPartition | None = None,
    scan: PartitionScan | None = None,
    high_watermark: int | None = None,
    high_watermark_source: HighWatermarkSource = HighWatermarkSource.LEADER_LOG_END,
    topic_id: str | None = None,
    log_dir: Path | None = None,
) -> LoadResult:
    """Load one partition dir (the module docstring's steps); ``read_only``: ``WouldWriteError``, not a write.

    The dir is listed once and the listing passed down; it is listed again only after a step renamed or
    deleted files, which a clean shutdown never leaves to do. After a clean shutdown each segment costs
    three ``os.stat`` calls (the ``.log``'s size, the two indexes for ``check_index_files``), no descriptor
    stays open. ``topic_partition``: the dir name's, if the caller parsed it. ``scan``: the dir as a prescan
    found it under the log dir's lock (``service.storage.prescan``): after a clean shutdown its listing,
    sizes and active segment's bytes stand in for those calls (on any other path it is not used), and
    where it made every check in C the segments are built from it alone (``_segments_checked_in_c``).
    ``high_watermark``: the broker's checkpointed one (None: the log end offset), and its source.
    ``topic_id``: the dir's ``partition.metadata`` id as the start-up's survey read it (None: the log reads
    the file). ``log_dir``: ``directory.parent``, one Path shared by the logs of a dir, whose text and hash
    are made once (a Path's text costs 4 µs; each log's file names are joined from it).
    """
    if topic_partition is None:
        parsed = parse_partition_dir_name(directory.name)
        topic_partition = TopicPartition(parsed.topic, parsed.partition)
    prefix = os.path.join(directory, "") if log_dir is None else os.path.join(log_dir, directory.name, "")
    checked = _segments_checked_in_c(directory, scan, config, clock, prefix) if clean_shutdown else None
    if checked is not None and checked[1] >= log_start_offset:  # below the start: step 5 deletes them
        (segments, log_end_offset), recovered, truncated = checked, 0, 0
        names = list(scan.shape.other_names)  # type: ignore[union-attr]  # the check took its shape
    else:
        scan, names, segments, log_end_offset, tally = _load_by_steps(
            directory,
            topic_partition,
            config,
            scan,
            clock=clock,
            prefix=prefix,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            clean_shutdown=clean_shutdown,
            read_only=read_only,
        )
        recovered, truncated = tally.recovered, tally.truncated
    log = _open_log(
        directory,
        topic_partition,
        config,
        segments,
        names,
        scan,
        clock=clock,
        log_start_offset=max(log_start_offset, segments[0].base_offset),
        log_end_offset=log_end_offset,
        recovery_point=log_end_offset if clean_shutdown else min(recovery_point, log_end_offset),
        clean_shutdown=clean_shutdown,
        read_only=read_only,
        high_watermark=high_watermark,
        high_watermark_source=high_watermark_source,
        topic_id=topic_id,
        log_dir=log_dir,
    )
    return LoadResult(log, recovered, truncated)


def _load_by_steps(
    directory: Path,
    topic_partition: TopicPartition,
    config: LogConfig,
    scan: PartitionScan | None,
    *,
    clock: Clock,
    prefix: str,
    log_start_offset: int,
    recovery_point: int,
    clean_shutdown: bool,
    read_only: bool,
) -> tuple[PartitionScan | None, list[str], list[LogSegment], int, _Recovery]:
    """The module docstring's steps, with the loader's own calls wherever ``scan`` lacks an item: the scan
    still used, the dir's names, the segments, the log end offset and what recovery did."""
    scan, names = _list_dir(directory, scan, clean_shutdown=clean_shutdown)
    if read_only and not clean_shutdown:
        raise WouldWriteError(f"{directory}: loading it recovers it (no clean shutdown recorded for it)")
    scan, names = _finish_interrupted_operations(directory, names, scan, config, clock, read_only=read_only)
    tracker = ProducerStateManager()  # enough to rebuild .txnindex files; the log's state is loaded below
    now_ms = clock.now_ms()  # the loaded segments' creation time (Kafka's ``LogSegment.open``)
    segments, rebuilt = _load_segments(
        directory,
        names,
        config,
        now_ms,
        tracker,
        clean_shutdown=clean_shutdown,
        read_only=read_only,
        scan=scan,
        dir_prefix=prefix,
    )
    tally = _Recovery(len(rebuilt), sum(rebuilt.values()), [*rebuilt])
    if not clean_shutdown and segments:
        segments = _recover_unclean(segments, recovery_point, tracker, rebuilt, tally)
    log_end_offset = log_start_offset
    if segments:
        segments, log_end_offset = _open_active_segment(
            directory, segments, scan, tracker, tally, clean_shutdown, read_only, log_start_offset
        )
    if tally.recovered or tally.truncated:
        _audit_recovery(directory, topic_partition, tally, clean_shutdown, recovery_point, log_end_offset)
    if not segments:
        segments = [_first_segment(directory, config, log_start_offset, now_ms, read_only=read_only)]
    return scan, names, segments, log_end_offset, tally


def _recover_unclean(
    segments: list[LogSegment],
    recovery_point: int,
    tracker: ProducerStateManager,
    rebuilt: dict[int, int],
    tally: _Recovery,
) -> list[LogSegment]:
    """Step 4, counted into ``tally``: recovery begins at the segment holding the recovery point."""
    tally.began_at.append(
        max((s.base_offset for s in segments if s.base_offset <= recovery_point), default=0)
    )
    segments, recovered_now, truncated_now = _recover(segments, recovery_point, tracker, rebuilt)
    tally.add(recovered_now, truncated_now)
    return segments


@dataclass(slots=True)
class _Recovery:
    """What recovery did so far: segments scanned, bytes truncated, and the offsets where scans began."""

    recovered: int
    truncated: int
    began_at: list[int]

    def add(self, recovered: int, truncated: int) -> None:
        self.recovered += recovered
        self.truncated += truncated


def _list_dir(
    directory: Path, scan: PartitionScan | None, *, clean_shutdown: bool
) -> tuple[PartitionScan | None, list[str]]:
    """The dir's names: the prescan's after a clean shutdown (no listing), else ``os.listdir``; and the scan
    kept, which only a clean load uses."""
    if scan is None or not clean_shutdown:
        return None, os.listdir(directory)
    if scan.shape is not None:  # the numbered names are in the shape, sorted out
        return scan, list(scan.shape.other_names)
    return scan, list(scan.sizes or ())


def _finish_interrupted_operations(
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


def _open_active_segment(
    directory: Path,
    segments: list[LogSegment],
    scan: PartitionScan | None,
    tracker: ProducerStateManager,
    tally: _Recovery,
    clean_shutdown: bool,
    read_only: bool,
    log_start_offset: int,
) -> tuple[list[LogSegment], int]:
    """The segments kept and the log end offset, read from the active segment: after a clean shutdown it is
    recovered if its files contradict the marker; a log ending below ``log_start_offset`` loses every
    segment and ends there (step 5)."""
    active = segments[-1]
    known_end: int | None = None
    if clean_shutdown:
        contradiction, known_end = _check_clean_active_segment(active, scan)
        if contradiction is not None:
            if read_only:
                raise WouldWriteError(
                    f"{directory}: loading it recovers its active segment ({contradiction})"
                )
            logger.warning(
                "%s: the clean-shutdown marker is contradicted by the active segment (%s); recovering it",
                directory,
                contradiction,
            )
            tally.add(1, active.recover(tracker.on_batch))
            tally.began_at.append(active.base_offset)
    # The active segment's indexes are preallocated again at its first append, not here (Kafka's
    # LazyIndex): an idle log then never resizes them, and its close trims and fsyncs nothing.
    log_end_offset = known_end if known_end is not None else active.read_next_offset()
    if clean_shutdown:
        active.close_file()  # nothing unsynced: the first append opens it again
    if log_end_offset < log_start_offset:
        if read_only:
            raise WouldWriteError(f"{directory}: loading it deletes every segment (all below the start)")
        logger.warning(
            "%s: log end offset %d is below the log start offset %d; deleting all segments",
            directory,
            log_end_offset,
            log_start_offset,
        )
        for segment in segments:
            segment.delete_files()
        return [], log_start_offset  # the log starts afresh there
    return segments, log_end_offset


def _audit_recovery(
    directory: Path,
    topic_partition: TopicPartition,
    tally: _Recovery,
    clean_shutdown: bool,
    recovery_point: int,
    log_end_offset: int,
) -> None:
    """One audit line per recovered partition: where recovery began, why, and what it cost."""
    audit_log.info(
        "%s Recovered the log from offset %d (%s): %s scanned, %d bytes truncated, log end offset %d",
        log_ident(topic_partition, directory.parent),
        min(tally.began_at),
        "files contradict the clean shutdown"
        if clean_shutdown
        else f"no clean shutdown recorded, recovery point {recovery_point}",
        counted(tally.recovered, "segment"),
        tally.truncated,
        log_end_offset,
    )


def _first_segment(
    directory: Path, config: LogConfig, base_offset: int, now_ms: int, *, read_only: bool
) -> LogSegment:
    """The empty segment of a log that has none (new, or emptied at load), its indexes preallocated."""
    if read_only:
        raise WouldWriteError(f"{directory}: loading it creates its first segment")
    segment = LogSegment.create(directory, base_offset, config=config, now_ms=now_ms)
    segment.offset_index.resize(config.segment_index_bytes)
    segment.time_index.resize(config.segment_index_bytes)
    return segment


def _open_log(
    directory: Path,
    topic_partition: TopicPartition,
    config: LogConfig,
    segments: list[LogSegment],
    names: list[str],
    scan: PartitionScan | None,
    *,
    clock: Clock,
    log_start_offset: int,
    log_end_offset: int,
    recovery_point: int,
    clean_shutdown: bool,
    read_only: bool,
    high_watermark: int | None,
    high_watermark_source: HighWatermarkSource,
    topic_id: str | None,
    log_dir: Path | None,
) -> PartitionLog:
    """The log over the loaded segments, with the broker files beside them (producer state, leader epochs,
    topic id: ``load_partition_files``)."""
    files = load_partition_files(
        directory,
        segments,
        log_start_offset=log_start_offset,
        log_end_offset=log_end_offset,
        recovery_point=recovery_point,
        names=names,
        clean_shutdown=clean_shutdown,
        read_only=read_only,
        snapshot_offsets=scan.shape.snapshot_offsets if scan is not None and scan.shape is not None else None,
        topic_id=topic_id,
    )
    return PartitionLog(
        directory,
        topic_partition,
        config,
        segments,
        log_start_offset=log_start_offset,
        recovery_point=max(recovery_point, log_start_offset) if clean_shutdown else recovery_point,
        log_end_offset=log_end_offset,
        clock=clock,
        txn_tracker=files.producer_state,
        leader_epochs=files.leader_epochs,
        topic_id=files.topic_id,
        deferred=files.deferred,
        high_watermark=high_watermark,
        high_watermark_source=high_watermark_source,
        log_dir=log_dir,
    )


def _check_clean_active_segment(
    active: LogSegment, scan: PartitionScan | None = None
) -> tuple[str | None, int | None]:
    """Why the active segment's files cannot be what a clean shutdown left (or None), and its end offset.

    Kafka's sanity checks at load: the indexes may not point past the log's end, and the log must read
    whole from the last offset-index entry (a truncated or zero-padded ``.log`` does not). An old-format
    batch is not a contradiction: it fails the partition's load, as it does after an unclean stop. The
    ``.log`` bytes come from ``scan`` if it read them from that position.
    """
    tail = None
    same_segment = scan is not None and scan.active_stem == file_name(active.base_offset, "")
    if scan is not None and same_segment and scan.log_tail is not None:
        tail = (scan.log_position, scan.log_tail)
    index = active.offset_index
    if index.entries > 0:
        _, position = index.lookup(index.last_offset)
        if position >= active.size_bytes:
            reason = (
                f"the offset index points at position {position}, past the log's {active.size_bytes} bytes"
            )
            return reason, None
    try:
        next_offset = active.read_next_offset(tail=tail)
    except UnsupportedFormatError:
        raise  # fails the partition's load before its indexes are preallocated again
    except CorruptDataError as exc:
        return exc.reason, None
    _, offset_of_max = active.time_index.last_entry()
    if active.time_index.entries > 0 and offset_of_max >= next_offset:
        reason = f"the time index names offset {offset_of_max}, at or past the log end offset {next_offset}"
        return reason, None
    active.mark_index_files_clean()  # an idle log's close then rewrites nothing
    return None, next_offset


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


def _base_offset(directory: Path, name: str) -> int:
    """A segment file's base offset; a name that does not start with one fails the partition's load."""
    try:
        return base_offset_from_name(name)
    except InvalidInputError as exc:
        raise CorruptDataError(
            f"file name {name!r} does not start with a base offset: not a segment file",
            path=str(directory / name),
        ) from exc


def _remove_temp_files(directory: Path, names: list[str]) -> list[str]:
    """Step 1; returns the dir's listing, listed again only if a file was deleted."""
    deleted = sorted(n for n in names if n.endswith(DELETED_SUFFIX))
    cleaned = sorted(n for n in names if n.endswith(CLEANED_SUFFIX))
    if not deleted and not cleaned:
        return names
    for name in deleted:
        (directory / name).unlink(missing_ok=True)
    min_cleaned = min((_base_offset(directory, n) for n in cleaned), default=None)
    if min_cleaned is not None:
        for name in sorted(n for n in names if n.endswith(SWAP_SUFFIX)):
            if _base_offset(directory, name) >= min_cleaned:
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
        base = _base_offset(directory, path.name)
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
        if min_swap <= _base_offset(directory, name) < max_swap:
            logger.info("Deleting %s: replaced by a completed swap", directory / name)
            (directory / name).unlink()
    for path in swaps:
        os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))
    fsync_dir(directory)
    return os.listdir(directory)


def _segments_checked_in_c(
    directory: Path, scan: PartitionScan | None, config: LogConfig, clock: Clock, prefix: str
) -> tuple[list[LogSegment], int] | None:
    """A clean load's segments and log end offset from a scan that made in C every check of the active
    segment's bytes (``_dirscan.c``: a shape, those bytes read and passed, its end offset found), if each
    sealed segment's index files pass ``check_index_files`` too; None otherwise: the general path, which
    repeats the checks, rebuilds what fails them and reports it. The segments are left as the general path
    leaves them: sizes as listed, index files checked, time-index edges primed, indexes lazy."""
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


def _load_segments(
    directory: Path,
    names: list[str],
    config: LogConfig,
    now_ms: int,
    tracker: ProducerStateManager,
    *,
    clean_shutdown: bool,
    read_only: bool = False,
    scan: PartitionScan | None = None,
    dir_prefix: str | None = None,
) -> tuple[list[LogSegment], dict[int, int]]:
    """Every segment in base-offset order; returns them and {base offset: bytes truncated} of rebuilt ones.

    A segment whose indexes fail their check is rebuilt. After a clean shutdown the check is Kafka's
    (``LogSegment.check_index_files``: stats, no entry read) for every segment but the active one, whose
    indexes are read whole anyway and get the full ``sanity_check``; after an unclean shutdown every
    segment gets the full check. With ``scan`` (a clean load only) the sizes and the active segment's
    index bytes are the scan's, checked as the files would be (a scan that made every check in C and found
    the end offset does not come here: ``_segments_checked_in_c``), and its ``shape``, if it has one, is
    what sorting out the names finds (no index without its log: nothing to delete).
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
        clean_shutdown=clean_shutdown,
        read_only=read_only,
        scan=scan,
        dir_prefix=dir_prefix,
    )


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
    log_bases = sorted(_base_offset(directory, n) for n in log_names.values())
    bases = set(log_bases)
    txn_bases = set()
    for name in index_names:
        stem = name.partition(".")[0]
        # Same name as a .log: no need to parse the offset (the common case, by far).
        base = -1 if stem in log_names else _base_offset(directory, name)
        if base != -1 and base not in bases:
            if read_only:
                raise WouldWriteError(f"{directory}: loading it deletes {name}, an index without a log file")
            logger.warning("Deleting %s: an index file without a log file", directory / name)
            (directory / name).unlink()
        elif name.endswith(TXN_INDEX_SUFFIX):
            txn_bases.add(_base_offset(directory, name))
    return log_bases, txn_bases


def _segments_from(
    directory: Path,
    log_bases: list[int],
    txn_bases: set[int],
    config: LogConfig,
    now_ms: int,
    tracker: ProducerStateManager,
    *,
    clean_shutdown: bool,
    read_only: bool,
    scan: PartitionScan | None,
    dir_prefix: str | None,
) -> tuple[list[LogSegment], dict[int, int]]:
    """``_load_segments`` once the names are sorted out."""
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
            if not clean_shutdown:
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
            rebuilt[base] = segment.recover(tracker.on_batch)
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


def _recover(
    segments: list[LogSegment], recovery_point: int, tracker: ProducerStateManager, rebuilt: dict[int, int]
) -> tuple[list[LogSegment], int, int]:
    """Recover every segment from the one holding the recovery point; drop all after a corrupt one.

    Segments already rebuilt while loading are not scanned twice; if that rebuild truncated one, it is
    the corrupt segment.
    """
    start = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= recovery_point:
            start = i
    recovered = 0
    for i in range(start, len(segments)):
        segment = segments[i]
        if segment.base_offset in rebuilt:
            truncated = rebuilt[segment.base_offset]
        else:
            logger.info("Recovering unflushed segment %s", segment.log_path)
            truncated = segment.recover(tracker.on_batch)
            recovered += 1
        if truncated:
            for later in segments[i + 1 :]:
                logger.warning(
                    "Deleting %s: it follows the corrupt segment %s", later.log_path, segment.log_path
                )
                later.delete_files()
            return segments[: i + 1], recovered, truncated if segment.base_offset not in rebuilt else 0
    return segments, recovered, 0

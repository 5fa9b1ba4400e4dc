"""Loading one partition dir, with Kafka's swap-file protocol and crash recovery (Kafka ``LogLoader``).

1-2. Finish what an interrupted retention, cleaning or split left: temporary files deleted, swaps
   completed (``interrupted_operations``).
3. Load segments in base-offset order, each one's index files checked and rebuilt where they fail
   (``segment_loading``).
4. After an unclean shutdown, recover from the segment holding the recovery point: validate every batch,
   rebuild the indexes, truncate at the first invalid batch and delete every later segment.
5. A log whose end is below the checkpointed log start offset starts afresh, empty, at that offset.

This module runs the steps in turn and opens the log over the segments.

A *read-only* load (the inspection commands) writes nothing: the broker files beside the segments are read
as they are (``load_partition_files``), and a step above that would write raises ``WouldWriteError``
naming it, so that the caller loads that partition from a copy instead. After a clean shutdown no step
writes, so a healthy partition is read in place.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from service.base.audit import audit_log, log_ident
from service.base.clock import Clock
from service.base.errors import CorruptDataError, UnsupportedFormatError, WouldWriteError
from service.base.wording import counted
from service.storage.high_watermark_source import HighWatermarkSource
from service.storage.interrupted_operations import finish_interrupted_operations
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.log_files import file_name, parse_partition_dir_name
from service.storage.partition_files import load_partition_files
from service.storage.prescan import PartitionScan
from service.storage.producer_state import ProducerStateManager
from service.storage.segment import LogSegment
from service.storage.segment_loading import first_recovered_base, load_segments, segments_checked_in_c
from service.storage.topic_partition import TopicPartition

__all__ = ["LoadResult", "load_partition_log"]

logger = logging.getLogger(__name__)


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
    where it made every check in C the segments are built from it alone (``segments_checked_in_c``).
    ``high_watermark``: the broker's checkpointed one (None: the log end offset), and its source.
    ``topic_id``: the dir's ``partition.metadata`` id as the start-up's survey read it (None: the log reads
    the file). ``log_dir``: ``directory.parent``, one Path shared by the logs of a dir, whose text and hash
    are made once (a Path's text costs 4 µs; each log's file names are joined from it).
    """
    if topic_partition is None:
        parsed = parse_partition_dir_name(directory.name)
        topic_partition = TopicPartition(parsed.topic, parsed.partition)
    prefix = os.path.join(directory, "") if log_dir is None else os.path.join(log_dir, directory.name, "")
    checked = segments_checked_in_c(directory, scan, config, clock, prefix) if clean_shutdown else None
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
    scan, names = finish_interrupted_operations(directory, names, scan, config, clock, read_only=read_only)
    tracker = ProducerStateManager()  # enough to rebuild .txnindex files; the log's state is loaded below
    now_ms = clock.now_ms()  # the loaded segments' creation time (Kafka's ``LogSegment.open``)
    segments, rebuilt = load_segments(
        directory,
        names,
        config,
        now_ms,
        tracker,
        clean_shutdown=clean_shutdown,
        recovery_point=recovery_point,
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
    start = first_recovered_base((s.base_offset for s in segments), recovery_point)
    tally.began_at.append(start)
    segments, recovered_now, truncated_now, tally.log_end_offset = _recover(segments, start, tracker, rebuilt)
    tally.add(recovered_now, truncated_now)
    return segments


@dataclass(slots=True)
class _Recovery:
    """What recovery did so far: segments scanned, bytes truncated, the offsets where scans began, and the
    log end offset if the last scan was of the active segment (None: not scanned yet)."""

    recovered: int
    truncated: int
    began_at: list[int]
    log_end_offset: int | None = None

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
    """The segments kept and the log end offset, read from the active segment unless step 4's scan of it
    found it: after a clean shutdown it is recovered if its files contradict the marker; a log ending
    below ``log_start_offset`` loses every segment and ends there (step 5)."""
    active = segments[-1]
    known_end = tally.log_end_offset
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
            recovered = active.recover(tracker.on_batch)
            tally.add(1, recovered.truncated_bytes)
            tally.began_at.append(active.base_offset)
            known_end = recovered.next_offset
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


def _recover(
    segments: list[LogSegment], start: int, tracker: ProducerStateManager, rebuilt: dict[int, int]
) -> tuple[list[LogSegment], int, int, int | None]:
    """Recover every segment from base offset ``start`` on; drop all after a corrupt one. Returns the
    segments kept, how many were scanned, the bytes truncated, and the log end offset if the last segment
    kept was scanned here (None: read it from the segment).

    Segments already rebuilt while loading are not scanned twice; if that rebuild truncated one, it is
    the corrupt segment.
    """
    recovered = 0
    next_offset = None
    for i, segment in enumerate(segments):
        if segment.base_offset < start:
            continue
        if segment.base_offset in rebuilt:
            truncated, next_offset = rebuilt[segment.base_offset], None
        else:
            if logger.isEnabledFor(logging.INFO):  # -v only: the path's Path costs more than the check
                logger.info("Recovering unflushed segment %s", segment.log_path)
            truncated, next_offset = segment.recover(tracker.on_batch)
            recovered += 1
        if truncated:
            for later in segments[i + 1 :]:
                logger.warning(
                    "Deleting %s: it follows the corrupt segment %s", later.log_path, segment.log_path
                )
                later.delete_files()
            kept = segments[: i + 1]
            return kept, recovered, truncated if segment.base_offset not in rebuilt else 0, next_offset
    return segments, recovered, 0, next_offset

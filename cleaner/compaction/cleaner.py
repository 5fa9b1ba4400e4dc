"""One cleaning round of one log (Kafka ``Cleaner.doClean``): the pure algorithm, its collaborators
(clock, throttler, abort check, delayed deletion) injected so that a test builds it in one line.

A round: build the key map over the dirty section [first dirty, upper bound) (``build_offset_map``);
group every segment below the map's end (the clean prefix too) by ``group_segments_by_size``; clean each
group into one segment (``clean_group``) and swap it in. ``end_offset`` is the next round's first dirty
offset (the caller checkpoints it).

Crash protocol of a group (Kafka ``LocalLog.replaceSegments``; the loader's recovery: ``storage/loader.py``):
  1. ``clean_group`` writes ``<base>.log.cleaned`` and its ``.index/.timeindex/.txnindex.cleaned``, with the
     final time-index entry, trimmed indexes and the last source segment's mtime, then they are fsynced
     (in a round, on the round's swap thread while the next group is cleaned). A crash now: the
     loader deletes every ``.cleaned`` file; the old segments are intact.
  2. ``PartitionLog.replace_segments`` renames ``.cleaned`` → ``.swap`` (a crash now: the loader completes
     the swap, deleting the old segments in the swap's offset range), renames the old segments
     ``.deleted`` (the loader deletes them), then ``.swap`` → final names and fsyncs the directory.
  3. The ``.deleted`` files are removed after ``file.delete.delay.ms`` by ``schedule_delete``.
An abort (``CleaningAbortedError`` from ``check_aborted``) or any error before step 2 deletes the group's
``.cleaned`` files and re-raises; groups already swapped in stay (each is a complete, valid cleaning).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from cleaner.compaction.cleaned_writer import META_FIELDS, CleanedWriter
from cleaner.compaction.group_swap import GroupSwap, SwapThread
from cleaner.compaction.grouping import group_segments_by_size
from cleaner.compaction.key_map_budget import KeyMapBudget
from cleaner.compaction.offset_map import OffsetMap, ReadPacer, build_offset_map, segments_overlapping
from cleaner.compaction.rules import (
    BatchOutcome,
    CleaningContext,
    LastRecord,
    ProducerScan,
    delete_horizon_for,
    filter_batch,
)
from cleaner.compaction.segment_chunks import RUN_BYTES, SegmentChunks
from cleaner.compaction.stats import CleanerStats
from cleaner.compaction.txn_metadata import CleanedTransactionMetadata, collect_aborted_txns
from cleaner.native import NativeKeyMap, cleaning_round, filter_batches, native_key_map, producer_ends
from service.base.clock import Clock
from service.base.errors import corrupt_data_in
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.partition_files import delete_marked_snapshot
from service.storage.records import RecordBatch
from service.storage.segment import LogSegment
from service.storage.txn_index import AbortedTxn

__all__ = [
    "Cleaner",
    "CleaningResult",
    "clean_group",
    "delete_segments",
    "group_aborted_txns",
    "round_down_to_segment",
]

logger = logging.getLogger(__name__)

ScheduleDelete = Callable[[int, Callable[[], None]], None]


@dataclass(frozen=True, slots=True)
class CleaningResult:
    """``end_offset``: the new first dirty offset (checkpoint it); ``stats``: what the round did;
    ``engine``: which engine ran it (``spark`` or ``in-process``)."""

    end_offset: int
    stats: CleanerStats
    engine: str = "in-process"


def _no_throttle(_bytes: int) -> None:
    return None


def _never_aborted() -> None:
    return None


class Cleaner:
    """Cleans logs one round at a time; holds no state between rounds (build one per thread or per round).

    ``max_map_entries`` caps the key map as Kafka's buffer does (``None``: the whole dirty section, the
    default); ``dedupe_buffer_bytes`` and ``load_factor`` only feed ``stats.buffer_utilization``;
    ``key_map_budget`` bounds the key map's memory (None: unbounded), the round still whole.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        schedule_delete: ScheduleDelete,
        throttle: Callable[[int], None] = _no_throttle,
        check_aborted: Callable[[], None] = _never_aborted,
        max_map_entries: int | None = None,
        dedupe_buffer_bytes: int = 134_217_728,
        load_factor: float = 0.9,
        thread_id: int = 0,
        key_map_budget: KeyMapBudget | None = None,
    ) -> None:
        self.clock = clock
        self.schedule_delete = schedule_delete
        self.throttle = throttle
        self.check_aborted = check_aborted
        self.max_map_entries = max_map_entries
        self.dedupe_buffer_bytes = dedupe_buffer_bytes
        self.load_factor = load_factor
        self.thread_id = thread_id
        self.key_map_budget = key_map_budget

    def clean(self, log: PartitionLog, first_dirty_offset: int, upper_bound_offset: int) -> CleaningResult:
        """One round over [first_dirty_offset, upper_bound_offset) (Kafka ``Cleaner.doClean``).

        ``upper_bound_offset`` is rounded down to the base of the segment holding it (never past the active
        segment's base). With first dirty == upper bound the round is rewrite-only: an empty key map, but
        every segment below the upper bound still goes through the horizon, empty-batch and transaction
        rules (and is rewritten where they change anything).
        """
        with cleaning_round():  # counted: its map's puts take a thread only while a core is spare
            return self._clean(log, first_dirty_offset, upper_bound_offset)

    def _clean(self, log: PartitionLog, first_dirty_offset: int, upper_bound_offset: int) -> CleaningResult:
        now_ms = self.clock.now_ms()
        stats = CleanerStats.start(self.clock)
        pacer = ReadPacer(self.check_aborted, self.throttle)
        segments = log.segments
        upper = round_down_to_segment(segments, upper_bound_offset)
        if upper < first_dirty_offset:
            stats.map_done(self.clock)
            stats.all_done(self.clock)
            return CleaningResult(first_dirty_offset, stats)
        offset_map = OffsetMap()
        build_offset_map(
            segments,
            first_dirty_offset,
            upper,
            offset_map,
            stats,
            max_entries=self.max_map_entries,
            pacer=pacer,
            budget=self.key_map_budget,
        )
        end_offset = offset_map.latest_offset + 1
        stats.map_size = offset_map.size
        stats.spill_classes = offset_map.spill_classes
        if offset_map.spill_classes:
            logger.info(
                "%s: its key map passed the thread's share and spilled to %d classes",
                log.topic_partition,
                offset_map.spill_classes,
            )
        stats.map_done(self.clock)
        below_end = [s for s in segments_overlapping(segments, 0, end_offset) if s is not segments[-1]]
        groups = group_segments_by_size(
            below_end, log.config.segment_bytes, log.config.segment_index_bytes, upper
        )
        with SwapThread(f"swap-{log.topic_partition}") as swap_thread:
            self._clean_groups(log, groups, offset_map, upper, now_ms, stats, pacer, swap_thread)
        stats.buffer_utilization = (
            offset_map.kafka_utilization_percent(self.dedupe_buffer_bytes, self.load_factor) / 100
        )
        stats.all_done(self.clock)
        logger.info(
            "%s",
            stats.summary(
                log_name=str(log.topic_partition),
                first_dirty_offset=first_dirty_offset,
                end_offset=end_offset,
                thread_id=self.thread_id,
            ),
        )
        if stats.invalid_records:
            logger.warning("\tFound %d invalid messages during compaction.", stats.invalid_records)
        return CleaningResult(end_offset, stats)

    def _clean_groups(
        self,
        log: PartitionLog,
        groups: Sequence[Sequence[LogSegment]],
        offset_map: OffsetMap,
        upper: int,
        now_ms: int,
        stats: CleanerStats,
        pacer: ReadPacer,
        swap_thread: SwapThread,
    ) -> None:
        """Clean each group and hand it to ``swap_thread`` to be synced and swapped in while the next one
        is cleaned; returns once every swap is done (or raises, the last complete group swapped)."""
        txn_state = CleanedTransactionMetadata()
        producers = ProducerScan()
        swap: GroupSwap | None = None  # the previous group's, syncing while this one is cleaned
        try:
            for group in groups:
                cleaned = self._clean_unswapped(
                    log,
                    group,
                    lookup=offset_map.lookup,
                    map_latest_offset=offset_map.latest_offset,
                    upper_bound=upper,
                    now_ms=now_ms,
                    txn_state=txn_state,
                    active_producers=producers.refresh(log),
                    stats=stats,
                    pacer=pacer,
                    fsync=False,
                )
                if swap is not None:
                    done, swap = swap, None
                    try:
                        self._swapped(log, done.result())
                    except BaseException:
                        if cleaned is not None:  # not handed over: nothing else would delete its files
                            cleaned.delete_files()
                        raise
                if cleaned is not None:
                    swap = GroupSwap(log, cleaned, group, swap_thread)
            if swap is not None:
                done, swap = swap, None
                self._swapped(log, done.result())
        except BaseException:
            if swap is not None:  # the group before the failure is complete: its swap goes on
                try:
                    self._swapped(log, swap.result())
                except Exception:
                    logger.exception("%s: swap of a cleaned group failed", log.topic_partition)
            raise

    def clean_segments(
        self,
        log: PartitionLog,
        segments: Sequence[LogSegment],
        *,
        lookup: Callable[[bytes], int],
        map_latest_offset: int,
        upper_bound: int,
        now_ms: int,
        txn_state: CleanedTransactionMetadata,
        active_producers: Mapping[int, LastRecord],
        stats: CleanerStats,
        pacer: ReadPacer | None = None,
    ) -> LogSegment | None:
        """Clean one group and swap the result in (Kafka ``cleanSegments``); None if it was left as is."""
        cleaned = self._clean_unswapped(
            log,
            segments,
            lookup=lookup,
            map_latest_offset=map_latest_offset,
            upper_bound=upper_bound,
            now_ms=now_ms,
            txn_state=txn_state,
            active_producers=active_producers,
            stats=stats,
            pacer=pacer,
            fsync=True,
        )
        if cleaned is not None:
            self._swapped(log, log.replace_segments([cleaned], segments))
        return cleaned

    def _clean_unswapped(
        self,
        log: PartitionLog,
        segments: Sequence[LogSegment],
        *,
        lookup: Callable[[bytes], int],
        map_latest_offset: int,
        upper_bound: int,
        now_ms: int,
        txn_state: CleanedTransactionMetadata,
        active_producers: Mapping[int, LastRecord],
        stats: CleanerStats,
        pacer: ReadPacer | None,
        fsync: bool,
    ) -> LogSegment | None:
        """``clean_group`` for one group of the log, ready for its swap (``fsync``: durable already; else
        ``group_swap.sync_and_swap`` syncs it); None if it was left as is."""
        pacer = pacer or ReadPacer(self.check_aborted, self.throttle)
        # the published segment list, without the log's lock: the previous group's swap holds that lock
        # through its renames and directory fsyncs, and it changes only segments below this group, which
        # the search (from this group's first segment on) never reads
        aborted = group_aborted_txns(log.snapshot.segments, segments)
        cleaned = clean_group(
            segments,
            lookup=lookup,
            map_latest_offset=map_latest_offset,
            now_ms=now_ms,
            delete_retention_ms=log.config.delete_retention_ms,
            upper_bound=upper_bound,
            txn_state=txn_state,
            active_producers=active_producers,
            aborted_txns=aborted,
            directory=log.directory,
            config=log.config,
            stats=stats,
            pacer=pacer,
            fsync=fsync,
        )
        if cleaned is None:
            logger.debug(
                "%s: segment %d unchanged, not rewritten", log.topic_partition, segments[0].base_offset
            )
            return None
        try:
            pacer.check()  # the last chance to stop before the swap publishes the group
        except BaseException:
            cleaned.delete_files()
            raise
        logger.debug(
            "%s: swapping in %s for segment(s) %s",
            log.topic_partition,
            cleaned.log_path,
            [s.base_offset for s in segments],
        )
        return cleaned

    def _swapped(self, log: PartitionLog, doomed: list[LogSegment]) -> None:
        """After a group's swap: the segments it replaced (``.deleted``) go after ``file.delete.delay.ms``."""
        if doomed:  # retention may have removed (and will delete) them all meanwhile
            self.schedule_delete(log.config.file_delete_delay_ms, partial(delete_segments, doomed))


def clean_group(
    segments: Sequence[LogSegment],
    *,
    lookup: Callable[[bytes], int],
    map_latest_offset: int,
    now_ms: int,
    delete_retention_ms: int,
    upper_bound: int,
    txn_state: CleanedTransactionMetadata,
    active_producers: Mapping[int, LastRecord],
    aborted_txns: Sequence[Sequence[AbortedTxn]],
    directory: Path,
    config: LogConfig,
    stats: CleanerStats,
    pacer: ReadPacer | None = None,
    fsync: bool = True,
) -> LogSegment | None:
    """Clean one group into one finished ``<base>.log.cleaned`` segment, or None if nothing would change.

    The unit a parallel task runs: every input is explicit. ``aborted_txns[i]`` are the aborted txns
    overlapping segment i (``collect_aborted_txns``), added to ``txn_state`` as segment i starts;
    ``txn_state`` is advanced through the group (pass a ``copy`` to keep the original). A one-segment
    group that would come out byte-identical (log and ``.txnindex``) is not written at all: the cleaned
    file is created only at the first change. On any error the ``.cleaned`` files are deleted. Without
    ``fsync`` the files are left for the caller to sync before the swap (``group_swap.sync_and_swap``).
    """
    pacer = pacer or ReadPacer(_never_aborted, _no_throttle)
    ctx = CleaningContext(
        lookup, map_latest_offset, now_ms, delete_retention_ms, upper_bound, active_producers
    )
    writer = CleanedWriter(segments, directory, config, now_ms)
    key_map = native_key_map(lookup)
    producers = ((pid, last.last_data_offset) for pid, last in active_producers.items())
    ends = producer_ends(producers) if key_map is not None else b""  # the C loop's only
    try:
        retained: list[AbortedTxn] = []
        for segment, aborted in zip(segments, aborted_txns, strict=True):
            pacer.check()
            txn_state.add_aborted_transactions(aborted)
            stats.segments_read += 1
            with corrupt_data_in(segment.log_path):
                if key_map is not None:
                    _clean_segment_native(
                        segment, key_map, ends, ctx, txn_state, retained, writer, stats, pacer
                    )
                    continue
                for batch in segment.batches(verify_crc=True):
                    _clean_batch(batch, ctx, txn_state, retained, writer, stats, pacer)
        pacer.flush()
        cleaned = writer.finish(retained, segments[-1].last_modified_ms(), fsync=fsync)
    except BaseException:
        writer.discard()
        raise
    if cleaned is None:
        stats.groups_skipped += 1
        stats.bytes_skipped += segments[0].size_bytes
    else:
        stats.groups_rewritten += 1
    return cleaned


def _clean_batch(
    batch: RecordBatch,
    ctx: CleaningContext,
    txn_state: CleanedTransactionMetadata,
    retained: list[AbortedTxn],
    writer: CleanedWriter,
    stats: CleanerStats,
    pacer: ReadPacer,
) -> None:
    """One batch through the transaction state and the rules (``rules.filter_batch``), into the writer."""
    pacer.read(batch.size_bytes)
    if batch.is_control:
        verdict = txn_state.on_control_batch_read(batch)
        can_discard = verdict.can_discard
        if verdict.retained_aborted_txn is not None:
            retained.append(verdict.retained_aborted_txn)
    else:
        can_discard = txn_state.on_batch_read(batch)
    outcome = filter_batch(batch, can_discard=can_discard, ctx=ctx)
    _count(stats, batch, outcome)
    writer.add(batch, outcome)
    if outcome.data is not None:
        pacer.written(len(outcome.data))


def _clean_segment_native(
    segment: LogSegment,
    key_map: NativeKeyMap,
    ends: bytes,
    ctx: CleaningContext,
    txn_state: CleanedTransactionMetadata,
    retained: list[AbortedTxn],
    writer: CleanedWriter,
    stats: CleanerStats,
    pacer: ReadPacer,
) -> None:
    """``_clean_batch`` over one segment, with runs of data batches (not ending at the upper bound) and
    transaction markers filtered and re-encoded in C a read chunk at a time (``ends``: ``producer_ends`` of
    the active producers), the transaction state changed as ``_clean_batch`` would change it; the C loop
    leaves every other batch to ``_clean_batch``."""
    new_horizon = delete_horizon_for(ctx.now_ms, ctx.delete_retention_ms)
    cursor = txn_state.native_cursor()
    with SegmentChunks(segment, 0) as chunks:
        while chunks.has_more:
            buf, at = chunks.chunk()
            reached, out, meta = filter_batches(
                buf,
                at,
                at + RUN_BYTES,
                key_map,
                ctx.map_latest_offset,
                ctx.now_ms,
                new_horizon,
                ctx.upper_bound,
                chunks.output_space(),
                ends,
                txn_state.ongoing_committed,
                cursor.cells,
            )
            if not meta:
                batch = chunks.batch_here()  # the batch C left: Python's, errors included
                retained.extend(txn_state.take_native(cursor))
                _clean_batch(batch, ctx, txn_state, retained, writer, stats, pacer)
                cursor = txn_state.native_cursor()
                chunks.position += batch.size_bytes
                continue
            rows = memoryview(meta).cast("q")
            read_bytes, written_bytes = sum(rows[2::META_FIELDS]), len(out)
            pacer.read(read_bytes)
            stats.bytes_read += read_bytes
            stats.records_read += sum(rows[7::META_FIELDS])
            stats.records_retained += sum(rows[8::META_FIELDS])
            stats.invalid_records += sum(rows[9::META_FIELDS])
            stats.bytes_written += written_bytes
            writer.add_run(chunks.buffer_start, out, rows)
            if written_bytes:
                pacer.written(written_bytes)
            chunks.position = chunks.buffer_start + reached
    retained.extend(txn_state.take_native(cursor))


def _count(stats: CleanerStats, batch: RecordBatch, outcome: BatchOutcome) -> None:
    stats.bytes_read += batch.size_bytes
    stats.records_read += outcome.records_read
    stats.records_retained += outcome.records_retained
    stats.invalid_records += outcome.invalid_records
    if outcome.data is not None:
        stats.bytes_written += len(outcome.data)


def group_aborted_txns(
    all_segments: Sequence[LogSegment], group: Sequence[LogSegment]
) -> list[list[AbortedTxn]]:
    """``clean_group``'s ``aborted_txns``: per segment of ``group``, the aborted txns overlapping it."""
    return [
        collect_aborted_txns(all_segments, s.base_offset, _segment_end(group, i)) for i, s in enumerate(group)
    ]


def _segment_end(group: Sequence[LogSegment], i: int) -> int:
    """Kafka's upper bound for a segment's aborted-txn search: the next base in the group, else its end."""
    return group[i + 1].base_offset if i + 1 < len(group) else group[i].read_next_offset()


def round_down_to_segment(segments: Sequence[LogSegment], offset: int) -> int:
    """The base of the segment holding ``offset``; at most the active segment's base (``LogToClean``)."""
    active = segments[-1]
    if offset >= active.base_offset:
        return active.base_offset
    base = offset
    for segment in segments:
        if segment.base_offset <= offset:
            base = segment.base_offset
    return base


def delete_segments(segments: Sequence[LogSegment]) -> None:
    """Remove replaced segments' files (what ``schedule_delete`` runs after ``file.delete.delay.ms``)."""
    for segment in segments:
        segment.delete_files()
        delete_marked_snapshot(segment.log_path.parent, segment.base_offset)

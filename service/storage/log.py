"""One partition's log (Kafka ``UnifiedLog`` + ``LocalLog``): segments, offsets, append, read, roll, flush.

The high watermark at load is the log end offset where this node leads the partition alone, else the
broker's (``replication-offset-checkpoint``; ``high_watermark_source`` says which); it is held within
[log start offset, log end offset] as Kafka's ``UnifiedLog.updateHighWatermark`` holds it, and an append by
logcleaner moves it to the new log end offset (logcleaner is then the only replica). ``_lock`` guards the
segment list, the offsets and the producer transaction state; appends, rolls, reads of the segment list and
offset changes take it.

A closed log (its topic deleted, or shutdown) refuses every read and write with ``LogClosedError``; a log
whose dir went offline with ``LogDirOfflineError``. Both are checked under ``_lock``, and a reader takes the
lock for each batch it reads, so no file is touched, let alone reopened by path, once ``close`` returns: after
a delete and a re-create, that path names the new topic's file. An ``OSError`` while appending, rolling,
flushing or closing takes the log offline at once and reports it through ``on_io_error``, so the owner takes
the whole log dir offline (Kafka's log-dir failure handling).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from service.base.audit import audit_log, log_ident
from service.base.clock import Clock
from service.base.errors import (
    InvalidInputError,
    LogClosedError,
    LogDirOfflineError,
    OffsetOutOfRangeError,
    PolicyViolationError,
)
from service.storage.atomic import fsync_dir
from service.storage.atomic_batch import AtomicBatch
from service.storage.compression import CompressionType
from service.storage.high_watermark_source import HighWatermarkSource
from service.storage.leader_epoch_cache import LeaderEpochCache
from service.storage.log_config import LogConfig
from service.storage.log_files import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX
from service.storage.partition_files import (
    NOTHING_DEFERRED,
    DeferredFiles,
    load_leader_epoch_cache,
    load_topic_id,
    mark_snapshot_deleted,
    read_deferred_producer_state,
    take_snapshot,
)
from service.storage.producer_state import ProducerStateManager
from service.storage.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Record,
    RecordBatch,
    encode_batch,
)
from service.storage.segment import LogSegment
from service.storage.topic_partition import TopicPartition
from service.storage.validation import validate_and_assign_offsets

__all__ = ["AppendInfo", "LogSnapshot", "PartitionLog"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What an append did: the offsets the records got, and the batch max timestamp stored."""

    first_offset: int
    last_offset: int
    record_offsets: tuple[int, ...]
    max_timestamp: int
    log_append_time_ms: int


class LogSnapshot(NamedTuple):
    """The log's figures as its last change left them, published whole (one attribute store) under the
    log's lock: a reader without the lock (a ``/metrics`` scrape, a checkpoint task) sees one consistent
    state and never waits for a writer, however long a retention pass or a cleaning holds the lock."""

    segments: tuple[LogSegment, ...]
    size_bytes: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


class PartitionLog:
    def __init__(
        self,
        directory: Path,
        topic_partition: TopicPartition,
        config: LogConfig,
        segments: Sequence[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        log_end_offset: int,
        clock: Clock,
        txn_tracker: ProducerStateManager | None = None,
        leader_epochs: LeaderEpochCache | None = None,
        topic_id: str | None = None,
        deferred: DeferredFiles = NOTHING_DEFERRED,
        high_watermark: int | None = None,
        high_watermark_source: HighWatermarkSource = HighWatermarkSource.LEADER_LOG_END,
        log_dir: Path | None = None,
    ) -> None:
        """``deferred`` names the files a clean load left unread: each is read at its first use (under
        ``_lock`` for the producer state and the leader epochs; see ``partition_files``).
        ``high_watermark``: the broker's checkpointed one (held within the log's offsets); None: the log
        end offset; ``high_watermark_source``: where it came from. ``log_dir``: ``directory.parent`` as the
        loader shares it among the dir's logs (its text and hash made once), else made here."""
        if not segments:
            raise ValueError("a log always has at least one segment")
        self.directory = directory
        self.log_dir = directory.parent if log_dir is None else log_dir  # the log dir holding it
        self.topic_partition = topic_partition
        self.config = config
        self.clock = clock
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = list(segments)
        self._bases: list[int] = [s.base_offset for s in segments]
        # Bytes of every segment but the active one, which no longer change: kept so that ``size_bytes``
        # is O(1) for the retention pass over every log. Whatever changes the segment list updates it.
        self._sealed_size_bytes = sum(s.size_bytes for s in self._segments[:-1])
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._log_end_offset = log_end_offset
        self._high_watermark = self._bounded_high_watermark(
            log_end_offset if high_watermark is None else high_watermark
        )
        self.high_watermark_source = high_watermark_source
        self._snapshot = LogSnapshot((), 0, 0, 0, 0)
        self._publish()
        self._txns: ProducerStateManager | None = None
        if not deferred.producer_snapshot:
            self._txns = txn_tracker or ProducerStateManager()
        # Kafka's epoch cache (``leader-epoch-checkpoint``); in memory only unless the loader gave one.
        self._leader_epochs: LeaderEpochCache | None = None
        if not deferred.leader_epoch_checkpoint:
            self._leader_epochs = leader_epochs or LeaderEpochCache(directory, persist=False)
        self._topic_id = topic_id  # of partition.metadata; None when the dir has none
        self._topic_id_unread = deferred.partition_metadata
        self._deferred_read_only = deferred.read_only  # a read-only load's: its deferred reads write nothing
        self.last_flush_ms = clock.now_ms()
        self._closed_reason: str | None = None
        self._offline_reason: str | None = None
        # Told of the OSError that took this log offline (the LogManager then takes its dir offline).
        self.on_io_error: Callable[[PartitionLog, OSError], None] | None = None

    @property
    def topic_id(self) -> str | None:
        """The topic id of ``partition.metadata`` (None when the dir has none), read on first use."""
        if self._topic_id_unread:
            if not self._may_read_deferred():
                return None
            # No lock: a read of an unchanging file, harmless if two threads both make it.
            self._topic_id = load_topic_id(self.directory)
            self._topic_id_unread = False
        return self._topic_id

    def _may_read_deferred(self) -> bool:
        """A file a clean load deferred is not read once the log is closed (its dir may be renamed for
        deletion) or offline (its disk failed): the caller answers as for a dir without that file."""
        return self._closed_reason is None and self._offline_reason is None

    @property
    def leader_epochs(self) -> LeaderEpochCache:
        """Kafka's epoch cache; a clean load leaves the checkpoint to be read (and cut to the log's
        offsets as they are then) here, on first use."""
        cache = self._leader_epochs
        if cache is None:
            if not self._may_read_deferred():
                return LeaderEpochCache(self.directory, persist=False)
            with self._lock:
                if self._leader_epochs is None:
                    self._leader_epochs = load_leader_epoch_cache(
                        self.directory,
                        self._segments,
                        log_start_offset=self._log_start_offset,
                        log_end_offset=self._log_end_offset,
                        read_only=self._deferred_read_only,
                        flush_truncation=False,  # a cut is written by flush_leader_epochs or close
                    )
                cache = self._leader_epochs
        return cache

    @property
    def snapshot(self) -> LogSnapshot:
        """The figures as of the last change, without the lock (see ``LogSnapshot``)."""
        return self._snapshot

    def _publish(self, *, segments_changed: bool = True) -> None:
        """Publish the figures; called under ``_lock`` by whatever changed them, before it lets go."""
        segments = tuple(self._segments) if segments_changed else self._snapshot.segments
        size = self._sealed_size_bytes + self._segments[-1].size_bytes
        self._snapshot = LogSnapshot(
            segments, size, self._log_start_offset, self._log_end_offset, self._high_watermark
        )

    @property
    def lock(self) -> threading.RLock:
        """The log's lock, for callers that must see a consistent segment list while they act on it."""
        return self._lock

    # -- closed and offline ----------------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        return self._closed_reason is not None

    @property
    def is_offline(self) -> bool:
        return self._offline_reason is not None

    def check_usable(self) -> None:
        """Raise ``LogDirOfflineError`` or ``LogClosedError`` unless the log may be read and written."""
        if self._offline_reason is not None:
            log_dir = self.log_dir
            raise LogDirOfflineError(
                f"partition {self.topic_partition} is unavailable: its log dir {log_dir} is offline "
                f"({self._offline_reason})",
                log_dir=str(log_dir),
            )
        if self._closed_reason is not None:
            raise LogClosedError(f"partition {self.topic_partition} {self._closed_reason}")

    def take_offline(self, reason: str) -> None:
        """Refuse every read and write from now on (an I/O error in the dir). Takes no lock, so the owner
        can call it for every log of the dir while some other thread holds one of them; the files stay
        open until ``abandon``."""
        if self._offline_reason is None:
            self._offline_reason = reason

    def abandon(self) -> None:
        """Release an offline log's files without writing: its dir failed, recovery runs at the next start."""
        with self._lock:
            self._closed_reason = self._closed_reason or "is closed"
            for segment in self._segments:
                segment.abandon()

    @contextlib.contextmanager
    def _io_failure_takes_offline(self) -> Iterator[None]:
        try:
            yield
        except LogDirOfflineError:
            raise
        except OSError as exc:
            self.take_offline(f"{type(exc).__name__}: {exc}")
            if self.on_io_error is not None:
                self.on_io_error(self, exc)
            logger.error("I/O error in %s: %s; the log is offline", self.topic_partition, exc)
            try:
                self.check_usable()
            except LogDirOfflineError as offline:
                raise offline from exc
            raise

    # -- offsets -----------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        """The offset below which records are acknowledged: retention and the cleaner never act at or past
        it, and consumers read below it (Kafka ``UnifiedLog.highWatermark``)."""
        return self._high_watermark

    def _bounded_high_watermark(self, offset: int) -> int:
        """``offset`` held within [log start offset, log end offset] (Kafka ``updateHighWatermark``)."""
        return min(max(offset, self._log_start_offset), self._log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        """min(high watermark, first offset of the oldest open transaction): the cleaner stops here.

        The first unstable offset never reads below the log start offset (Kafka
        ``updateFirstUnstableOffset``): once retention or DeleteRecords passes an open transaction's start,
        it is reported as the log start offset (scenario A23).
        """
        first_open = self.producer_state.first_unstable_offset()
        if first_open is None:
            return self.high_watermark
        return min(max(first_open, self._log_start_offset), self.high_watermark)

    @property
    def producer_state(self) -> ProducerStateManager:
        """The producer state; a clean load leaves the snapshot at the log end offset to be read here, on
        first use (no append comes first: each starts here)."""
        state = self._txns
        if state is None:
            if not self._may_read_deferred():
                return ProducerStateManager()
            with self._lock:
                if self._txns is None:
                    self._txns = read_deferred_producer_state(
                        self.directory,
                        self._segments,
                        self._log_end_offset,
                        read_only=self._deferred_read_only,
                        dir_text=os.path.join(self.log_dir, self.directory.name),  # the shared dir's text
                    )
                state = self._txns
        return state

    def remove_expired_producers(self, expiration_ms: int) -> list[int]:
        """Producer ids idle for ``producer.id.expiration.ms`` with no open transaction are forgotten."""
        with self._lock:
            return self.producer_state.remove_expired_producers(self.clock.now_ms(), expiration_ms)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        """Bytes of all segments: the sealed ones' sum, kept up to date, plus the active segment's."""
        with self._lock:
            return self._sealed_size_bytes + self._segments[-1].size_bytes

    @property
    def segments(self) -> list[LogSegment]:
        with self._lock:
            return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def segment_for(self, offset: int) -> LogSegment | None:
        """The segment whose range holds ``offset`` (the last with base offset ≤ offset)."""
        with self._lock:
            index = bisect.bisect_right(self._bases, offset) - 1
            return self._segments[index] if index >= 0 else None

    # -- append ------------------------------------------------------------------------------------

    def append_batches(self, data: bytes) -> AppendInfo:
        """Validate the batches in ``data``, assign offsets from the log end offset, and append them."""
        with self._lock, self._io_failure_takes_offline():
            self.check_usable()
            now_ms = self.clock.now_ms()
            epoch = self.leader_epochs.epoch_for_append()  # a leader stamps its epoch on every batch
            validated = validate_and_assign_offsets(
                data,
                next_offset=self._log_end_offset,
                config=self.config,
                now_ms=now_ms,
                partition_leader_epoch=epoch,
            )
            payload = b"".join(v.data for v in validated)
            last = validated[-1].batch
            max_timestamp = max(v.max_timestamp for v in validated)
            holder = max(validated, key=lambda v: v.max_timestamp).batch
            segment = self._maybe_roll(
                len(payload), max_timestamp, last.last_offset, validated[0].batch.base_offset
            )
            segment.append(
                payload,
                largest_offset=last.last_offset,
                max_timestamp=max_timestamp,
                offset_of_max_timestamp=holder.last_offset,
            )
            for v in validated:
                for aborted in self.producer_state.on_batch(v.batch, high_watermark=v.batch.next_offset):
                    segment.append_aborted_txn(aborted)
            self._log_end_offset = last.next_offset
            self._high_watermark = self._log_end_offset  # the only replica: acknowledged once appended
            self.high_watermark_source = HighWatermarkSource.LEADER_LOG_END
            self.leader_epochs.assign(epoch, validated[0].batch.base_offset)  # first append of the epoch
            if self._log_end_offset - self._recovery_point >= self.config.flush_messages:
                self.flush()
            self._publish(segments_changed=False)  # a roll above published the new list
            offsets = tuple(o for v in validated for o in v.record_offsets)
            return AppendInfo(
                offsets[0], offsets[-1], offsets, max_timestamp, validated[0].log_append_time_ms
            )

    def append_records(
        self,
        records: Sequence[Record],
        *,
        compression: CompressionType = CompressionType.NONE,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
    ) -> AppendInfo:
        """Append records as one batch, as a producer would send them (record offsets are ignored)."""
        if not records:
            raise InvalidInputError("an append needs at least one record")
        numbered = [r._replace(offset=i) for i, r in enumerate(records)]
        batch = encode_batch(
            numbered,
            base_offset=0,
            compression=compression,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=is_transactional,
        )
        return self.append_batches(batch)

    def _maybe_roll(self, size: int, max_timestamp: int, last_offset: int, first_offset: int) -> LogSegment:
        segment = self.active_segment
        segment.preallocate_indexes()  # the first append after a load (the loader leaves them trimmed)
        if segment.should_roll(
            self.config,
            incoming_bytes=size,
            incoming_max_timestamp=max_timestamp,
            incoming_last_offset=last_offset,
            now_ms=self.clock.now_ms(),
        ):
            return self.roll(expected_next_offset=first_offset)
        return segment

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected next offset, LEO); the old one becomes inactive."""
        with self._lock, self._io_failure_takes_offline():
            self.check_usable()
            new_base = max(expected_next_offset or 0, self._log_end_offset)
            active = self.active_segment
            if active.base_offset == new_base:
                if active.size_bytes > 0:
                    raise InvalidInputError(f"segment {new_base} already exists and is not empty")
                # An empty active segment at the same base is simply kept (Kafka recreates it).
                return active
            if new_base < active.base_offset:
                raise InvalidInputError(
                    f"cannot roll to {new_base}, below the active segment {active.base_offset}"
                )
            active.on_become_inactive()
            segment = LogSegment.create(
                self.directory, new_base, config=self.config, now_ms=self.clock.now_ms()
            )
            self._segments.append(segment)
            self._bases.append(new_base)
            self._sealed_size_bytes += active.size_bytes
            self._publish()
            # Named by the new segment's base offset.
            take_snapshot(self.directory, new_base, self.producer_state)
            # Kafka flushes the old segments asynchronously after a roll; we do it now, in the roll.
            self.flush(new_base)
            active.release()  # a sealed segment holds no descriptor until a read opens one
            return segment

    # -- read --------------------------------------------------------------------------------------

    def read_batches(self, offset: int) -> Iterator[RecordBatch]:
        """Batches from the one holding ``offset`` (or the next one, if compaction removed it) to the end.

        A segment is opened (its offset index read, its ``.log`` descriptor taken) only while it is still
        in the segment list, under the lock; from then on its batches come from that descriptor, even once
        a swap or retention renamed it ``.deleted`` and its delayed deletion removed the file, as Kafka's
        read goes on from the segment's open channel. A segment that left the list after the reader listed
        it (and before it was opened: its files may be gone already) is not touched: the reader lists the
        segments again from the next offset it has not read, so a cleaned replacement is read instead, and
        offsets retention removed meanwhile are passed.
        """
        if offset > self._log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is past the log end offset {self._log_end_offset}",
                offset=offset,
                log_start_offset=self._log_start_offset,
                log_end_offset=self._log_end_offset,
            )
        position = max(offset, self._log_start_offset)  # the next offset to read
        with self._lock:
            self.check_usable()
            pending = iter(self._segments_from(position))
            end = self._log_end_offset
        while (segment := next(pending, None)) is not None:
            batches: Iterator[RecordBatch] | None = None
            while True:
                with self._lock:  # each read under the lock: a close cannot come between check and read
                    self.check_usable()
                    if batches is None:
                        if not self._is_live(segment):  # replaced or deleted since it was listed
                            pending = iter(self._segments_from(max(position, self._log_start_offset)))
                            break
                        batches = segment.read_from(position)
                    batch = next(batches, None)
                if batch is None:
                    break
                if batch.base_offset >= end:
                    return
                position = max(position, batch.next_offset)
                yield batch

    def _segments_from(self, offset: int) -> list[LogSegment]:
        """The live segments from the one holding ``offset`` on (``_lock`` held)."""
        return self._segments[max(bisect.bisect_right(self._bases, offset) - 1, 0) :]

    def _is_live(self, segment: LogSegment) -> bool:
        """Whether ``segment`` is still in the segment list (``_lock`` held)."""
        index = bisect.bisect_right(self._bases, segment.base_offset) - 1
        return index >= 0 and self._segments[index] is segment

    def read(self, offset: int, max_records: int = 500) -> list[Record]:
        """Up to ``max_records`` records from ``offset`` on; a missing offset gives the next record."""
        start = max(offset, self._log_start_offset)
        out: list[Record] = []
        for batch in self.read_batches(offset):
            if batch.is_control:
                continue
            for record in batch.records():
                if record.offset >= start:
                    out.append(record)
                    if len(out) >= max_records:
                        return out
        return out

    # -- offsets that move -------------------------------------------------------------------------

    def delete_records(self, before_offset: int) -> bool:
        """Kafka's DeleteRecords (``Partition.deleteRecordsOnLeader``): refused on a topic whose
        ``cleanup.policy`` has no ``delete`` (``PolicyViolationError``), else
        ``increment_log_start_offset``."""
        config = self.config
        if not config.has_delete_policy:
            policy = ",".join(sorted(config.cleanup_policy))
            why = f"the configured policy (cleanup.policy={policy})"
            if config.configs_unknown:
                why = "the topic's unknown configs (import them with topic-config --import, or set them)"
            raise PolicyViolationError(
                f"PolicyViolationException: records of partition {self.topic_partition} cannot be "
                f"deleted due to {why}; DeleteRecords needs 'delete' in the policy (compact,delete)",
                topic=self.topic_partition.topic,
                partition=self.topic_partition.partition,
                policy=policy,
            )
        return self.increment_log_start_offset(before_offset)

    def increment_log_start_offset(self, new_start: int) -> bool:
        """Advance the log start offset (never past the high watermark): DeleteRecords' step."""
        with self._lock:
            self.check_usable()
            if new_start > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot advance the log start offset to {new_start}: past the high watermark "
                    f"{self.high_watermark}",
                    offset=new_start,
                    log_start_offset=self._log_start_offset,
                    log_end_offset=self._log_end_offset,
                )
            if new_start <= self._log_start_offset:
                return False
            previous = self._log_start_offset
            self._log_start_offset = new_start
            self._recovery_point = max(self._recovery_point, new_start)
            self._publish(segments_changed=False)
            self.leader_epochs.truncate_from_start(new_start)
        audit_log.info(
            "%s Incremented log start offset from %d to %d due to client delete records request",
            log_ident(self.topic_partition, self.log_dir),
            previous,
            new_start,
        )
        return True

    def delete_oldest_segments(self, count: int) -> list[LogSegment]:
        """Retention's deletion (``UnifiedLog.deleteSegments``): drop the ``count`` oldest segments.

        Rolls first when every segment goes (so the log keeps one and its end offset stays), advances the
        log start offset to the first surviving segment, and renames the dropped segments' files to
        ``.deleted`` at once. The caller removes those files after ``file.delete.delay.ms``.
        """
        if count <= 0:
            return []
        with self._lock:
            self.check_usable()
            if count > len(self._segments):
                raise ValueError(f"cannot delete {count} of {len(self._segments)} segments")
            if count == len(self._segments):
                self.roll()
            doomed = self._segments[:count]
            del self._segments[:count]
            del self._bases[:count]
            self._sealed_size_bytes -= sum(s.size_bytes for s in doomed)  # all sealed: the roll came first
            self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
            self._recovery_point = max(self._recovery_point, self._log_start_offset)
            # Never moves in practice: retention deletes nothing past the high watermark.
            self._high_watermark = max(self._high_watermark, self._log_start_offset)
            self._publish()
            # The checkpoint file is written later: see flush_leader_epochs.
            self.leader_epochs.truncate_from_start(self._log_start_offset, flush=False)
            for segment in doomed:
                segment.close_file()
                segment.change_file_suffixes("", DELETED_SUFFIX)
                mark_snapshot_deleted(self.directory, segment.base_offset)
            return doomed

    def replace_segments(self, cleaned: Sequence[LogSegment], old: Sequence[LogSegment]) -> list[LogSegment]:
        """Swap cleaned segments in for the ones they replace, crash-safely (``LocalLog.replaceSegments``).

        The caller wrote ``cleaned`` as complete ``.cleaned`` segments (flushed, indexes trimmed). Steps,
        and what a crash after each leaves for the loader (Kafka ``LogLoader``):

        1. each cleaned segment ``.cleaned`` → ``.swap``, highest base first — a crash here: a ``.swap``
           with a ``.cleaned`` at or below it is an interrupted round, deleted; a complete ``.swap`` set
           is finished by the loader, which deletes the segments in its offset range;
        2. the old segments leave the segment list and are renamed ``.deleted`` (the loader deletes those);
        3. each ``.swap`` loses its suffix, and the directory is fsynced.

        Old segments that retention removed meanwhile are skipped. Returns the old segments, now
        ``.deleted``, for the caller to remove after ``file.delete.delay.ms``.
        """
        with self._lock:
            self.check_usable()
            for segment in sorted(cleaned, key=lambda s: s.base_offset, reverse=True):
                segment.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
            fsync_dir(self.directory)
            live = {id(s) for s in self._segments}
            doomed = [s for s in old if id(s) in live]
            gone = {id(s) for s in doomed}
            kept = [s for s in self._segments if id(s) not in gone]
            self._segments = sorted(kept + list(cleaned), key=lambda s: s.base_offset)
            self._bases = [s.base_offset for s in self._segments]
            self._sealed_size_bytes = sum(s.size_bytes for s in self._segments[:-1])
            self._publish()
            kept_bases = set(self._bases)
            for segment in doomed:
                segment.close_file()
                segment.change_file_suffixes("", DELETED_SUFFIX)
                if segment.base_offset not in kept_bases:  # its snapshot goes with it (Kafka)
                    mark_snapshot_deleted(self.directory, segment.base_offset)
            for segment in cleaned:
                segment.change_file_suffixes(SWAP_SUFFIX, "")
                segment.release()
            fsync_dir(self.directory)
            return doomed

    def flush(self, offset: int | None = None) -> None:
        """fsync every segment overlapping [recovery point, offset); the recovery point moves to offset."""
        with self._lock, self._io_failure_takes_offline():
            self.check_usable()
            target = self._log_end_offset if offset is None else offset
            if target <= self._recovery_point and offset is not None:
                return
            for i, segment in enumerate(self._segments):
                upper = self._bases[i + 1] if i + 1 < len(self._bases) else self._log_end_offset + 1
                if upper > self._recovery_point and segment.base_offset < target:
                    segment.flush()
            self._recovery_point = max(self._recovery_point, target)
            self.last_flush_ms = self.clock.now_ms()

    @property
    def has_unflushed_leader_epochs(self) -> bool:
        """Whether retention or the checkpoint's first read after a load left the file behind the cache (see
        flush_leader_epochs)."""
        cache = self._leader_epochs
        return cache is not None and cache.has_unflushed_change

    def flush_leader_epochs(self) -> None:
        """Write the leader-epoch checkpoint that retention's truncation left for later (the delete-file
        task calls it after the pass, off the pass's thread; ``close`` does too). A closed log has nothing
        to write: its close wrote it, or its files were deleted."""
        with self._lock, self._io_failure_takes_offline():
            cache = self._leader_epochs  # never read yet: retention has not cut it
            if cache is not None and self._closed_reason is None and self._offline_reason is None:
                cache.flush()

    def stage_leader_epochs(self, batch: AtomicBatch) -> int | None:
        """``flush_leader_epochs`` as one file of a batch (``LeaderEpochCache.stage_flush``): the token for
        ``commit_leader_epochs``, or None when there is nothing to write."""
        with self._lock, self._io_failure_takes_offline():
            cache = self._leader_epochs
            if cache is None or self._closed_reason is not None or self._offline_reason is not None:
                return None
            return cache.stage_flush(batch)

    def commit_leader_epochs(self, batch: AtomicBatch, token: int) -> bool:
        """After the batch's sync: the staged checkpoint replaces the file, unless the log changed it,
        closed or went offline meanwhile (then the staged file is dropped and this returns False)."""
        with self._lock, self._io_failure_takes_offline():
            cache = self._leader_epochs
            if cache is None:
                return False
            if self._closed_reason is not None or self._offline_reason is not None:
                cache.discard_flush(batch)
                return False
            return cache.commit_flush(batch, token)

    def close(self, *, deleted: bool = False) -> None:
        """Flush and close every segment cleanly (final time-index entries, trimmed indexes); from then on
        every read and write is refused (``deleted``: saying the topic was deleted). Closing twice is a
        no-op; an I/O error takes the log offline (see ``on_io_error``) and leaves it unclosed."""
        with self._lock, self._io_failure_takes_offline():
            if self._closed_reason is not None:
                return
            if deleted:  # its files go: no flush, index or snapshot (Kafka's asyncDelete writes none)
                for segment in self._segments:
                    segment.abandon()
            else:
                self.flush()
                # A producer state never read (a clean load defers it) is read now, as Kafka reads it at
                # load: a corrupt snapshot at the log end offset is deleted (and the state rebuilt from
                # the segments, still open) and a valid one written instead.
                state = self.producer_state
                for segment in self._segments:
                    segment.close()
                take_snapshot(self.directory, self._log_end_offset, state)
                if self._leader_epochs is not None:  # a truncation retention left to write
                    self._leader_epochs.flush()
            self._closed_reason = "was deleted" if deleted else "is closed"

    def __repr__(self) -> str:
        return f"PartitionLog({self.topic_partition}, [{self._log_start_offset}, {self._log_end_offset}))"

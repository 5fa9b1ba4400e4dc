"""Kafka's compaction rules as plain functions (``Cleaner.cleanInto``'s filter, KIP-534): which batch and
which record survive, when a delete horizon is stamped, and the bytes a surviving batch is written as.

These are the rules a later Spark path applies at scale and that tests compare its output against, so
every decision here is a function of explicit inputs: the batch, whether the transaction state lets it go
(``can_discard``, from ``CleanedTransactionMetadata``) and the round's ``CleaningContext``.

Batch retention, first match wins (Kafka 4.0):
  1. the batch is its producer's last entry (last data batch, or a marker carrying the current epoch when
     the producer has no data) ⇒ RETAIN_EMPTY, so sequence and epoch survive;
  2. the batch ends right below the round's upper bound ⇒ RETAIN_EMPTY (KAFKA-17076, 4.0);
  3. its records may all go (aborted data; a marker that may go and whose horizon passed) ⇒ DELETE;
  4. otherwise DELETE_EMPTY: dropped if no record survives.
A record survives iff the batch is not DELETE and: it is a control record; or its offset is above the key
map's latest offset; or it has a key, no later offset in the map, and a value or a horizon not yet passed.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from cleaner.native import (
    NativeKeyMap,
    encode_rebuilt_batch,
    filter_records,
    has_native,
    native_key_map,
    scan_producer_headers,
)
from service.storage.compression import CompressionType
from service.storage.log import PartitionLog
from service.storage.log_config import LONG_MAX
from service.storage.records import (
    BATCH_HEADER,
    NO_TIMESTAMP,
    Record,
    RecordBatch,
    TimestampType,
    encode_batch,
)
from service.storage.segment import LogSegment

__all__ = [
    "BatchOutcome",
    "BatchRetention",
    "CleaningContext",
    "LastRecord",
    "ProducerScan",
    "active_producers",
    "batch_retention",
    "delete_horizon_for",
    "empty_batch",
    "filter_batch",
    "is_last_record_of_producer",
    "rebuild_batch",
]

_CONTROL_BIT = 0x20
_SCAN_CHUNK_BYTES = 4 << 20


class BatchRetention(enum.Enum):
    DELETE = "delete"  # dropped without looking at its records
    DELETE_EMPTY = "delete-empty"  # dropped if no record survives
    RETAIN_EMPTY = "retain-empty"  # kept, as a bare header if no record survives


@dataclass(frozen=True, slots=True)
class LastRecord:
    """An active producer's last entry (Kafka ``LastRecord``): last data batch's last offset, and epoch."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class CleaningContext:
    """The inputs every batch decision of one group shares."""

    lookup: Callable[[bytes], int]  # key → its latest offset in the dirty section, -1 if absent
    map_latest_offset: int
    now_ms: int  # when the round started
    delete_retention_ms: int
    upper_bound: int  # the round's first uncleanable offset
    active_producers: Mapping[int, LastRecord]


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """One source batch after filtering: the bytes to write (None: gone) and what was counted."""

    data: bytes | None
    is_unchanged: bool  # ``data`` is the source batch, byte for byte
    retention: BatchRetention
    records_read: int
    records_retained: int
    invalid_records: int
    max_timestamp: int


def is_last_record_of_producer(batch: RecordBatch, producers: Mapping[int, LastRecord]) -> bool:
    last = producers.get(batch.producer_id)
    if last is None:
        return False
    if last.last_data_offset is not None:
        return batch.last_offset == last.last_data_offset
    return batch.is_control and batch.producer_epoch == last.producer_epoch


def batch_retention(batch: RecordBatch, *, discard_records: bool, ctx: CleaningContext) -> BatchRetention:
    if batch.has_producer_id and is_last_record_of_producer(batch, ctx.active_producers):
        return BatchRetention.RETAIN_EMPTY
    if batch.next_offset == ctx.upper_bound:
        return BatchRetention.RETAIN_EMPTY
    return BatchRetention.DELETE if discard_records else BatchRetention.DELETE_EMPTY


def delete_horizon_for(now_ms: int, delete_retention_ms: int) -> int:
    """now + delete.retention.ms, capped at Long.MAX (Kafka's long addition would wrap negative)."""
    return min(now_ms + delete_retention_ms, LONG_MAX)


def filter_batch(batch: RecordBatch, *, can_discard: bool, ctx: CleaningContext) -> BatchOutcome:
    """Apply the filter to one batch; ``can_discard`` is the transaction state's verdict on it."""
    horizon = batch.delete_horizon_ms
    if batch.is_control:
        discard_records = can_discard and horizon is not None and horizon <= ctx.now_ms
    else:
        discard_records = can_discard
    retention = batch_retention(batch, discard_records=discard_records, ctx=ctx)
    if retention is BatchRetention.DELETE:
        return BatchOutcome(None, False, retention, 0, 0, 0, batch.max_timestamp)
    key_map = native_key_map(ctx.lookup)
    if key_map is not None:
        outcome = _filter_batch_native(
            batch,
            key_map,
            discard_records=discard_records,
            can_discard=can_discard,
            retention=retention,
            ctx=ctx,
        )
        if outcome is not None:
            return outcome
    records = batch.records()
    retains_deletes = horizon is None or ctx.now_ms < horizon
    kept: list[Record] = []
    invalid = 0
    has_tombstone = False
    for record in records:
        if discard_records:
            continue
        if not batch.is_control and record.offset <= ctx.map_latest_offset:
            if record.key is None:
                invalid += 1
                continue
            if _is_superseded(record, key_map, ctx) or (record.value is None and not retains_deletes):
                continue
        kept.append(record)
        has_tombstone = has_tombstone or record.value is None
    if not kept:
        data = empty_batch(batch) if retention is BatchRetention.RETAIN_EMPTY else None
        return _outcome(batch, data, retention, len(records), 0, invalid, batch.max_timestamp)
    needs_horizon = horizon is None and (has_tombstone or (can_discard and batch.is_control))
    if len(kept) == len(records) and not needs_horizon:
        return BatchOutcome(
            batch.data, True, retention, len(records), len(kept), invalid, batch.max_timestamp
        )
    if needs_horizon:
        horizon = delete_horizon_for(ctx.now_ms, ctx.delete_retention_ms)
    data = rebuild_batch(batch, kept, delete_horizon_ms=horizon)
    max_timestamp = _rebuilt_max_timestamp(batch, kept)
    return _outcome(batch, data, retention, len(records), len(kept), invalid, max_timestamp)


def _is_superseded(record: Record, key_map: NativeKeyMap | None, ctx: CleaningContext) -> bool:
    """Whether a later offset of the dirty section holds the record's key (the C map answers itself: a
    spilled map answers from its bitmap alone)."""
    key = record.key
    if key is None:
        return False
    if key_map is not None:
        return key_map.superseded(key, record.offset)
    return record.offset < ctx.lookup(key)


def _filter_batch_native(
    batch: RecordBatch,
    key_map: NativeKeyMap,
    *,
    discard_records: bool,
    can_discard: bool,
    retention: BatchRetention,
    ctx: CleaningContext,
) -> BatchOutcome | None:
    """``filter_batch``'s record loop in C (``cleaner.native``); None: the batch needs the Python rules."""
    result = filter_records(
        batch,
        key_map=key_map,
        map_latest_offset=ctx.map_latest_offset,
        now_ms=ctx.now_ms,
        new_horizon_ms=delete_horizon_for(ctx.now_ms, ctx.delete_retention_ms),
        discard_records=discard_records,
        can_discard=can_discard,
    )
    if result is None:
        return None
    area, read, kept, invalid, kept_max_timestamp, base_timestamp, horizon = result
    if not kept:
        data = empty_batch(batch) if retention is BatchRetention.RETAIN_EMPTY else None
        return _outcome(batch, data, retention, read, 0, invalid, batch.max_timestamp)
    if area is None:
        return BatchOutcome(batch.data, True, retention, read, kept, invalid, batch.max_timestamp)
    if batch.timestamp_type is TimestampType.LOG_APPEND_TIME:
        max_timestamp = batch.max_timestamp
    else:
        max_timestamp = kept_max_timestamp
    data = encode_rebuilt_batch(
        batch,
        area,
        records_count=kept,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        delete_horizon_ms=horizon,
    )
    return _outcome(batch, data, retention, read, kept, invalid, max_timestamp)


def _outcome(
    batch: RecordBatch,
    data: bytes | None,
    retention: BatchRetention,
    read: int,
    retained: int,
    invalid: int,
    max_timestamp: int,
) -> BatchOutcome:
    unchanged = data is not None and data == batch.data
    return BatchOutcome(data, unchanged, retention, read, retained, invalid, max_timestamp)


def _rebuilt_max_timestamp(batch: RecordBatch, kept: list[Record]) -> int:
    if batch.timestamp_type is TimestampType.LOG_APPEND_TIME:
        return batch.max_timestamp
    return max((r.timestamp for r in kept), default=NO_TIMESTAMP)


def rebuild_batch(batch: RecordBatch, kept: list[Record], *, delete_horizon_ms: int | None) -> bytes:
    """The survivors as one batch: same header fields, codec at its default level, original lastOffset.

    Records keep their offsets and timestamps; the timestamp deltas are recomputed against the new base
    timestamp (the delete horizon when there is one, else the first survivor's timestamp).
    """
    return encode_batch(
        kept,
        base_offset=batch.base_offset,
        compression=batch.compression,
        timestamp_type=batch.timestamp_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        partition_leader_epoch=batch.partition_leader_epoch,
        delete_horizon_ms=delete_horizon_ms,
        last_offset_delta=batch.last_offset_delta,
        max_timestamp=_rebuilt_max_timestamp(batch, kept),
    )


def empty_batch(batch: RecordBatch) -> bytes:
    """Kafka ``DefaultRecordBatch.writeEmptyHeader``: the header alone, no records, no codec, no horizon."""
    return encode_batch(
        [],
        base_offset=batch.base_offset,
        compression=CompressionType.NONE,
        timestamp_type=batch.timestamp_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        partition_leader_epoch=batch.partition_leader_epoch,
        last_offset_delta=batch.last_offset_delta,
        max_timestamp=batch.max_timestamp,
        base_timestamp=NO_TIMESTAMP,
    )


# -- active producers (the filter's inputs; their last batches stay) -----------------------------------


def active_producers(log: PartitionLog) -> dict[int, LastRecord]:
    """producer id → its last entry, from a header-only scan of every segment (the active one included).

    What Kafka's producer state gives ``lastRecordsOfActiveProducers``: a data batch sets the last data
    offset and epoch; a marker with a new epoch clears the data offset (Kafka drops the batch metadata on an
    epoch bump). Producer ids never expire here (Kafka expires them after producer.id.expiration.ms).
    """
    return ProducerScan().refresh(log)


class ProducerScan:
    """``active_producers`` kept up to date between groups by scanning only what was appended since.

    Remembers the last segment scanned (the log's last, above the round's range, so cleaning never
    replaces it) and the position reached; if that segment is gone from the log, scans everything again.
    """

    def __init__(self) -> None:
        self._last: dict[int, LastRecord] = {}
        self._segment: LogSegment | None = None
        self._position = 0

    def refresh(self, log: PartitionLog) -> dict[int, LastRecord]:
        """The scan reaches the log's end as published (``log.snapshot``: no wait for the log's lock, which a
        group's swap holds through its directory fsyncs; the segments scanned are above the round's)."""
        segments = log.snapshot.segments
        start = next((i for i, s in enumerate(segments) if s is self._segment), None)
        if start is None:
            self._last, start, self._position = {}, 0, 0
        for i in range(start, len(segments)):
            segment = segments[i]
            position = self._position if segment is self._segment else 0
            self._segment = segment
            self._position = _scan_headers(segment, position, self._last)
        return dict(self._last)


def _scan_headers(segment: LogSegment, position: int, last: dict[int, LastRecord]) -> int:
    """Update ``last`` from the batch headers from ``position`` on; returns the position reached."""
    scanned = _scan_headers_native(segment, position)
    if scanned is None:
        rows: list[int] = []
        for attributes, last_offset, producer_id, epoch, reached in _iter_headers(segment, position):
            if producer_id >= 0:
                rows += (attributes, last_offset, producer_id, epoch)
            position = reached
    else:
        position, rows = scanned
    for attributes, last_offset, producer_id, epoch in zip(
        rows[0::4], rows[1::4], rows[2::4], rows[3::4], strict=True
    ):
        if not attributes & _CONTROL_BIT:
            last[producer_id] = LastRecord(last_offset, epoch)
        else:
            previous = last.get(producer_id)
            if previous is None or previous.producer_epoch != epoch:
                last[producer_id] = LastRecord(None, epoch)
    return position


def _scan_headers_native(segment: LogSegment, position: int) -> tuple[int, list[int]] | None:
    """``_iter_headers`` in C: the position reached and flat rows of the producers' batches, a producer's
    data batches between two of its markers as the last one's row (none if the segment is gone), or None
    without the C module."""
    if not has_native():
        return None
    fd = _open_log(segment)
    if fd is None:
        return position, []
    try:
        return scan_producer_headers(fd, position, segment.size_bytes)
    finally:
        os.close(fd)


def _open_log(segment: LogSegment) -> int | None:
    """A read-only descriptor of the segment's ``.log``, or None if retention removed it meanwhile."""
    try:
        return os.open(segment.log_path, os.O_RDONLY)
    except FileNotFoundError:
        return None


def _iter_headers(segment: LogSegment, position: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(attributes, last offset, producer id, epoch, next position) per batch, reading 4 MiB at a time."""
    end = segment.size_bytes
    fd = _open_log(segment)
    if fd is None:
        return
    try:
        buf, buf_start = b"", position
        while position + BATCH_HEADER.size <= end:
            if position + BATCH_HEADER.size > buf_start + len(buf):
                buf, buf_start = os.pread(fd, min(_SCAN_CHUNK_BYTES, end - position), position), position
                if len(buf) < BATCH_HEADER.size:
                    return
            fields = BATCH_HEADER.unpack_from(buf, position - buf_start)
            size = fields[1] + 12
            if size < BATCH_HEADER.size or position + size > end:
                return  # a partial tail: the segment is being appended to
            position += size
            yield fields[5], fields[0] + fields[6], fields[9], fields[10], position
    finally:
        os.close(fd)

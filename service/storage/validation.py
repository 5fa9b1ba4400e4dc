"""Append-time validation and offset assignment (Kafka ``LogValidator``, magic v2 only).

Checks each incoming batch (CRC, size up to ``max.message.bytes``, inner offsets, unkeyed records on
compacted topics, KIP-937 timestamp bounds for CreateTime) and assigns offsets in place: the base offset is
outside the CRC, so rewriting it keeps the batch valid. A LogAppendTime topic stamps the broker's clock
into maxTimestamp and the attributes, which does need a new CRC.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from service.base.errors import CorruptDataError, InvalidInputError, RecordTooLargeError
from service.storage.log_config import LogConfig
from service.storage.records import NO_TIMESTAMP, RecordBatch, TimestampType, crc32c_of, decode_batch

__all__ = ["ValidatedBatch", "validate_and_assign_offsets"]

_BASE_OFFSET = struct.Struct(">q")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_CRC = struct.Struct(">I")
_TIMESTAMP_TYPE_BIT = 0x08


@dataclass(frozen=True, slots=True)
class ValidatedBatch:
    """A batch ready to append: its final bytes and what the log and indexes need to know of it."""

    data: bytes
    batch: RecordBatch
    record_offsets: tuple[int, ...]
    max_timestamp: int
    log_append_time_ms: int


def validate_and_assign_offsets(
    data: bytes,
    *,
    next_offset: int,
    config: LogConfig,
    now_ms: int,
    partition_leader_epoch: int | None = None,
) -> list[ValidatedBatch]:
    """Validate every batch in ``data`` and give them offsets from ``next_offset`` on.

    All-or-nothing: any invalid batch or record raises before anything is returned. A leader stamps its
    ``partition_leader_epoch`` on every batch (outside the CRC, like the base offset).
    """
    validated = []
    pos = 0
    while pos < len(data):
        try:
            batch = decode_batch(data, pos, position=pos, verify_crc=True)
        except CorruptDataError as exc:
            raise CorruptDataError(f"invalid batch in append: {exc.reason}", position=exc.position) from exc
        one = _validate_batch(
            batch, next_offset=next_offset, config=config, now_ms=now_ms, epoch=partition_leader_epoch
        )
        validated.append(one)
        next_offset = one.batch.next_offset
        pos += batch.size_bytes
    if not validated:
        raise InvalidInputError("an append needs at least one record batch")
    total = sum(len(v.data) for v in validated)
    if total > config.segment_bytes:
        raise RecordTooLargeError(
            f"append of {total} bytes is larger than segment.bytes={config.segment_bytes}"
        )
    return validated


def _validate_batch(
    batch: RecordBatch, *, next_offset: int, config: LogConfig, now_ms: int, epoch: int | None = None
) -> ValidatedBatch:
    if batch.size_bytes > config.max_message_bytes:
        raise RecordTooLargeError(
            f"batch of {batch.size_bytes} bytes at position {batch.position} is larger than "
            f"max.message.bytes={config.max_message_bytes}"
        )
    if batch.records_count == 0:
        raise InvalidInputError(
            f"batch at position {batch.position} has no records; producers cannot send empty batches"
        )
    if batch.last_offset_delta != batch.records_count - 1:  # Kafka LogValidator.validateBatch
        raise InvalidInputError(
            f"batch at position {batch.position} has an inconsistent offset range: last offset delta "
            f"{batch.last_offset_delta} for {batch.records_count} records"
        )
    if batch.producer_id >= 0 and batch.base_sequence < 0 and not batch.is_control:  # a producer's batch
        raise InvalidInputError(
            f"invalid sequence number {batch.base_sequence} in the batch at position {batch.position} "
            f"with producer id {batch.producer_id}"
        )
    records = batch.records()
    if len(records) != batch.records_count:
        raise InvalidInputError(f"batch declares {batch.records_count} records but holds {len(records)}")
    create_time_check = config.message_timestamp_type is TimestampType.CREATE_TIME
    max_timestamp = NO_TIMESTAMP
    for index, record in enumerate(records):
        expected = batch.base_offset + index
        if record.offset != expected:
            raise InvalidInputError(
                f"record {index} has offset delta {record.offset - batch.base_offset}, expected {index}: "
                "a producer's batch must have contiguous offsets from 0"
            )
        if config.is_compacted and record.key is None and not batch.is_control:
            raise InvalidInputError(
                f"record {index} has no key; compacted topics "
                f"(cleanup.policy={','.join(sorted(config.cleanup_policy))}) require a key on every record"
            )
        if create_time_check and record.timestamp != NO_TIMESTAMP:
            _check_timestamp_bounds(index, record.timestamp, config, now_ms)
        max_timestamp = max(max_timestamp, record.timestamp)
    if batch.timestamp_type is TimestampType.LOG_APPEND_TIME and (
        config.message_timestamp_type is TimestampType.LOG_APPEND_TIME or max_timestamp == NO_TIMESTAMP
    ):
        raise InvalidInputError(
            "a producer's batch must not claim LogAppendTime; the log sets it (message.timestamp.type)"
        )
    delta = next_offset - batch.base_offset
    offsets = tuple(r.offset + delta for r in records)
    buf = bytearray(batch.data)
    _BASE_OFFSET.pack_into(buf, 0, next_offset)
    if epoch is not None:
        _INT32.pack_into(buf, 12, epoch)
    log_append_time = NO_TIMESTAMP
    if config.message_timestamp_type is TimestampType.LOG_APPEND_TIME:
        log_append_time = max_timestamp = now_ms
        _INT16.pack_into(buf, 21, batch.attributes | _TIMESTAMP_TYPE_BIT)
        _INT64.pack_into(buf, 35, now_ms)
    elif batch.max_timestamp != max_timestamp:
        _INT64.pack_into(buf, 35, max_timestamp)
    if bytes(buf[21:61]) != batch.data[21:61]:
        _CRC.pack_into(buf, 17, crc32c_of(memoryview(buf)[21:]))
    data = bytes(buf)
    final = decode_batch(data, verify_crc=False)
    return ValidatedBatch(data, final, offsets, max_timestamp, log_append_time)


def _check_timestamp_bounds(index: int, timestamp: int, config: LogConfig, now_ms: int) -> None:
    if now_ms - timestamp > config.message_timestamp_before_max_ms:
        raise InvalidInputError(
            f"record {index} has timestamp {timestamp}, {now_ms - timestamp} ms before the log's clock "
            f"{now_ms}; message.timestamp.before.max.ms={config.message_timestamp_before_max_ms}"
        )
    if timestamp - now_ms > config.message_timestamp_after_max_ms:
        raise InvalidInputError(
            f"record {index} has timestamp {timestamp}, {timestamp - now_ms} ms after the log's clock "
            f"{now_ms}; message.timestamp.after.max.ms={config.message_timestamp_after_max_ms}"
        )

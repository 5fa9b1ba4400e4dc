"""Record batches, magic v2 (Kafka ``DefaultRecordBatch``/``DefaultRecord``), encoded and decoded.

Batch layout (big-endian; 61-byte header, ``RECORD_BATCH_OVERHEAD``)::

    pos size field                       pos size field
    0   8    baseOffset int64            35  8    maxTimestamp int64
    8   4    batchLength int32 (=size-12) 43  8    producerId int64
    12  4    partitionLeaderEpoch int32  51  2    producerEpoch int16
    16  1    magic int8 (2)              53  4    baseSequence int32
    17  4    crc uint32, CRC-32C of [21:) 57  4    recordsCount int32
    21  2    attributes int16            61  ...  records (or one compressed blob of them)
    23  4    lastOffsetDelta int32
    27  8    baseTimestamp int64 (the delete horizon when attribute bit 6 is set)

Attributes: bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control, 6 delete horizon.
Record: varint length, int8 attributes, varlong timestampDelta, varint offsetDelta, varint keyLength + key
(-1 = null), varint valueLength + value (-1 = null: a tombstone), varint headerCount, headers (varint key
length + UTF-8 key, varint value length + value, -1 = null).
A record's offset is baseOffset + offsetDelta and its timestamp baseTimestamp + timestampDelta, except in
LogAppendTime batches, where every record has the batch's maxTimestamp.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, NoReturn

from service.base.errors import CorruptDataError, UnsupportedFormatError
from service.storage.compression import CompressionType, compress, decompress
from service.storage.native_module import load_native_module
from service.storage.varint import decode_varint, encode_varint

__all__ = [
    "crc32c_of",
    "BATCH_HEADER",
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "RECORD_BATCH_OVERHEAD",
    "Header",
    "Record",
    "RecordBatch",
    "TimestampType",
    "decode_batch",
    "decode_records",
    "decode_records_py",
    "encode_batch",
    "encode_records",
    "iter_batches",
    "peek_batch_size",
]


_crc32c: Callable[..., int] | None = None  # crc32c.crc32c, imported at its first use


def crc32c_of(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of ``data``, continuing ``value``. The ``crc32c`` package is imported at the first call:
    its import (importlib.metadata's with it) was a fifth of every command's start, and an inspection
    (``explain``, ``retention --dry-run``) computes no CRC."""
    global _crc32c
    if _crc32c is None:
        import crc32c

        _crc32c = crc32c.crc32c
    return int(_crc32c(data, value))


LOG_OVERHEAD = 12  # baseOffset + batchLength: enough to know a batch's size
MAGIC_OFFSET = 16
RECORD_BATCH_OVERHEAD = 61
CURRENT_MAGIC = 2
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_LOG_OVERHEAD = struct.Struct(">qi")
_CRC = struct.Struct(">I")

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40
_INT32_MAX = (1 << 31) - 1
_LEGACY_MIN_SIZE = LOG_OVERHEAD + 14  # a magic 0 message: crc, magic, attributes, key and value lengths


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        return "CreateTime" if self is TimestampType.CREATE_TIME else "LogAppendTime"


class Header(NamedTuple):
    key: str
    value: bytes | None


class Record(NamedTuple):
    """One record. A tuple, not a dataclass: scans build millions of them."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


_speedups = load_native_module("service.storage._speedups")  # the optional C decoder (``_speedups.c``)
if _speedups is not None:
    _speedups.init(Record, Header)  # registered with our tuple types


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A decoded v2 batch header plus the batch's bytes; records are decoded on demand."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    data: bytes
    position: int = 0

    @property
    def size_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> CompressionType:
        return CompressionType(self.attributes & _CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & _TIMESTAMP_TYPE_BIT) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """baseSequence + lastOffsetDelta, wrapping past INT32_MAX to 0 as Kafka does."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (_INT32_MAX + 1)

    def computed_crc(self) -> int:
        return crc32c_of(memoryview(self.data)[21:])

    def is_crc_valid(self) -> bool:
        return self.computed_crc() == self.crc

    def records_bytes(self) -> bytes:
        """The uncompressed record encodings (the records area, decompressed)."""
        blob = self.data[RECORD_BATCH_OVERHEAD:]
        codec = self.attributes & _CODEC_MASK
        if codec == 0:
            return blob
        try:
            return decompress(CompressionType(codec), blob)
        except CorruptDataError as exc:
            raise exc.at(position=self.position + RECORD_BATCH_OVERHEAD) from exc
        except ValueError as exc:
            raise CorruptDataError(
                f"unknown compression codec id {codec}", position=self.position + 21
            ) from exc

    def records(self) -> list[Record]:
        """Decode every record (decompressing first); corrupt content raises ``CorruptDataError``."""
        log_append_time = self.max_timestamp if self.attributes & _TIMESTAMP_TYPE_BIT else None
        if self.records_count == 0 and len(self.data) == RECORD_BATCH_OVERHEAD:
            return []  # an empty batch, whatever its codec bits say (Kafka reads no records either)
        raw = self.records_bytes()  # its errors already carry the absolute position
        try:
            return decode_records(
                raw,
                self.records_count,
                self.base_offset,
                self.base_timestamp,
                log_append_time,
            )
        except CorruptDataError as exc:
            raise exc.at(position=self.position) from exc


def peek_batch_size(buf: bytes | memoryview, pos: int = 0) -> int:
    """The total size of the batch at ``buf[pos]`` from its 12-byte log overhead."""
    _, batch_length = _LOG_OVERHEAD.unpack_from(buf, pos)
    return int(batch_length) + LOG_OVERHEAD


def decode_batch(
    buf: bytes | memoryview, pos: int = 0, *, position: int | None = None, verify_crc: bool = True
) -> RecordBatch:
    """Decode the batch header at ``buf[pos]``; ``position`` is its place in the file, for errors.

    Raises ``CorruptDataError`` for a truncated or malformed batch or a CRC mismatch and
    ``UnsupportedFormatError`` for magic 0/1 message sets.
    """
    where = pos if position is None else position
    available = len(buf) - pos
    if available < LOG_OVERHEAD:
        _raise_bad_size(None, available, where, LOG_OVERHEAD)
    _, batch_length = _LOG_OVERHEAD.unpack_from(buf, pos)
    size = batch_length + LOG_OVERHEAD
    # Kafka's order (FileLogInputStream): the size must be plausible and the whole batch present before
    # the magic byte means anything; a torn tail (a header, then zeros) is corrupt, not an old format.
    if size < _LEGACY_MIN_SIZE or size > available:
        _raise_bad_size(size, available, where, _LEGACY_MIN_SIZE)
    if buf[pos + MAGIC_OFFSET] in (0, 1):
        _raise_legacy(buf, pos, size, where)
    if size < RECORD_BATCH_OVERHEAD:
        _raise_bad_size(size, available, where, RECORD_BATCH_OVERHEAD)
    fields = BATCH_HEADER.unpack_from(buf, pos)
    magic = fields[3]
    if magic != CURRENT_MAGIC:
        raise CorruptDataError(f"unknown magic byte {magic}", position=where + MAGIC_OFFSET)
    data = bytes(buf[pos : pos + size])
    if verify_crc:
        computed = crc32c_of(memoryview(data)[21:])
        if computed != fields[4]:
            raise CorruptDataError(
                f"CRC mismatch: stored {fields[4]:#010x}, computed {computed:#010x}", position=where
            )
    if fields[12] < 0:
        raise CorruptDataError(f"negative record count {fields[12]}", position=where + 57)
    if fields[6] < 0:
        raise CorruptDataError(f"negative lastOffsetDelta {fields[6]}", position=where + 23)
    (
        base_offset,
        _,
        leader_epoch,
        _,
        crc,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        pid,
        epoch,
        seq,
        count,
    ) = fields
    return RecordBatch(
        base_offset,
        batch_length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_delta,
        base_ts,
        max_ts,
        pid,
        epoch,
        seq,
        count,
        data,
        where,
    )


def _raise_bad_size(size: int | None, available: int, where: int, minimum: int) -> NoReturn:
    """The batch at ``where`` is cut short or its size field is implausible (``size`` None: not even its
    log overhead is there). Kept out of ``decode_batch``, the hot path, which only compares."""
    if size is None:
        raise CorruptDataError(
            f"incomplete batch: {available} bytes left, the log overhead alone is {LOG_OVERHEAD}",
            position=where,
        )
    if size < minimum:
        raise CorruptDataError(
            f"batch size {size} is smaller than the {RECORD_BATCH_OVERHEAD}-byte batch header",
            position=where,
        )
    raise CorruptDataError(
        f"incomplete batch: header says {size} bytes, only {available} left", position=where
    )


def _raise_legacy(buf: bytes | memoryview, pos: int, size: int, where: int) -> NoReturn:
    """A magic 0/1 message: unsupported if its zlib CRC-32 holds (a real old segment), else corrupt.

    A legacy message keeps its CRC at 12 and the magic at 16, the CRC covering [16, size); bytes a torn
    write left (zeros, garbage) fail it, and recovery truncates them as Kafka's ``ensureValid`` would.
    """
    magic = buf[pos + MAGIC_OFFSET]
    (stored,) = _CRC.unpack_from(buf, pos + LOG_OVERHEAD)
    computed = zlib.crc32(memoryview(buf)[pos + MAGIC_OFFSET : pos + size])
    if stored != computed:
        raise CorruptDataError(
            f"magic {magic} message with an invalid CRC (stored {stored:#010x}, computed {computed:#010x})",
            position=where,
        )
    raise UnsupportedFormatError(
        f"message set with magic {magic} (Kafka < 0.11 format) is not supported; "
        "only record batches with magic 2 are",
        position=where,
    )


def iter_batches(
    buf: bytes | memoryview, *, base_position: int = 0, verify_crc: bool = True
) -> Iterator[RecordBatch]:
    """Every batch in ``buf`` in order; stops with ``CorruptDataError`` at the first bad one."""
    pos = 0
    end = len(buf)
    while pos < end:
        batch = decode_batch(buf, pos, position=base_position + pos, verify_crc=verify_crc)
        yield batch
        pos += batch.batch_length + LOG_OVERHEAD


def decode_records(
    raw: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
) -> list[Record]:
    """Decode ``count`` records from ``raw``; positions in errors are relative to the records area.

    Uses the C fast path when it is built; it handles valid input only and hands anything odd to the
    Python decoder below, which stays the specification and the source of every error.
    """
    if _speedups is not None:
        try:
            return _speedups.decode_records(raw, count, base_offset, base_timestamp, log_append_time)  # type: ignore[no-any-return]
        except _speedups.Fallback:
            pass
    return decode_records_py(raw, count, base_offset, base_timestamp, log_append_time)


def decode_records_py(
    raw: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
) -> list[Record]:
    """The pure-Python record decoder: the reference for the C fast path."""
    records: list[Record] = []
    pos = 0
    end = len(raw)
    try:
        for _ in range(count):
            length, pos = decode_varint(raw, pos)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise CorruptDataError(f"record length {length} runs past the batch end", position=pos)
            pos += 1  # record attributes: unused
            ts_delta, pos = decode_varint(raw, pos)
            offset_delta, pos = decode_varint(raw, pos)
            key, pos = _decode_nullable_bytes(raw, pos, "key")
            value, pos = _decode_nullable_bytes(raw, pos, "value")
            headers, pos = _decode_headers(raw, pos)
            if pos != record_end:
                raise CorruptDataError(
                    f"record content ({pos - record_end + length} bytes) does not match its length {length}",
                    position=pos,
                )
            timestamp = base_timestamp + ts_delta if log_append_time is None else log_append_time
            records.append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    except CorruptDataError as exc:
        # A length may have carried the position past the area's end: report the end instead.
        inner = min(exc.position or 0, end)
        raise CorruptDataError(
            f"record {len(records)} of {count}: {exc.reason}", position=RECORD_BATCH_OVERHEAD + inner
        ) from exc
    if pos != end:
        raise CorruptDataError(
            f"{end - pos} bytes left after the {count} records the batch declares",
            position=RECORD_BATCH_OVERHEAD + pos,
        )
    return records


def _decode_nullable_bytes(raw: bytes, pos: int, what: str) -> tuple[bytes | None, int]:
    """A varint length (-1 = null) and that many bytes; a short slice is caught by the record length check."""
    length, pos = decode_varint(raw, pos)
    if length == -1:
        return None, pos
    if length < -1:
        raise CorruptDataError(f"invalid {what} length {length}", position=pos)
    return raw[pos : pos + length], pos + length


def _decode_headers(raw: bytes, pos: int) -> tuple[tuple[Header, ...], int]:
    count, pos = decode_varint(raw, pos)
    if count == 0:
        return (), pos
    if count < 0:
        raise CorruptDataError(f"invalid header count {count}", position=pos)
    headers = []
    for _ in range(count):
        key_length, pos = decode_varint(raw, pos)
        if key_length < 0:
            raise CorruptDataError(f"invalid header key length {key_length}", position=pos)
        key_bytes = raw[pos : pos + key_length]
        if len(key_bytes) != key_length:
            raise CorruptDataError("header key runs past the record", position=pos)
        pos += key_length
        try:
            key = key_bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptDataError("header key is not valid UTF-8", position=pos) from exc
        value, pos = _decode_nullable_bytes(raw, pos, "header value")
        headers.append(Header(key, value))
    return tuple(headers), pos


def _encode_bytes(data: bytes | None) -> bytes:
    if data is None:
        return b"\x01"  # zig-zag(-1)
    return encode_varint(len(data)) + data


def encode_records(records: Sequence[Record], base_offset: int, base_timestamp: int) -> bytes:
    """The record encodings, back to back, relative to the batch's base offset and timestamp."""
    parts = []
    for record in records:
        body = [
            b"\x00",
            encode_varint(record.timestamp - base_timestamp),
            encode_varint(record.offset - base_offset),
            _encode_bytes(record.key),
            _encode_bytes(record.value),
            encode_varint(len(record.headers)),
        ]
        for header in record.headers:
            key = header.key.encode("utf-8")
            body.append(encode_varint(len(key)) + key)
            body.append(_encode_bytes(header.value))
        encoded = b"".join(body)
        parts.append(encode_varint(len(encoded)))
        parts.append(encoded)
    return b"".join(parts)


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int | None = None,
    compression: CompressionType = CompressionType.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
    base_timestamp: int | None = None,
    records_area: bytes | None = None,
) -> bytes:
    """Encode one v2 batch with a valid CRC.

    Offsets and timestamps are the records' own; base offset defaults to the first record's offset.
    Empty batches (compaction keeps them for producer state) need ``base_offset`` and
    ``last_offset_delta``. ``records_area`` lets a caller that already has the (compressed) records
    area of ``len(records)`` records reuse it, e.g. when only the header changes.
    """
    if base_offset is None:
        if not records:
            raise ValueError("an empty batch needs an explicit base_offset")
        base_offset = records[0].offset
    if last_offset_delta is None:
        if not records:
            raise ValueError("an empty batch needs an explicit last_offset_delta")
        last_offset_delta = records[-1].offset - base_offset
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=NO_TIMESTAMP)
    if base_timestamp is None:
        if delete_horizon_ms is not None:
            base_timestamp = delete_horizon_ms
        else:
            base_timestamp = records[0].timestamp if records else NO_TIMESTAMP
    attributes = int(compression) | (int(timestamp_type) << 3)
    if is_transactional:
        attributes |= _TRANSACTIONAL_BIT
    if is_control:
        attributes |= _CONTROL_BIT
    if delete_horizon_ms is not None:
        attributes |= _DELETE_HORIZON_BIT
    if records_area is None:
        records_area = encode_records(records, base_offset, base_timestamp)
        if compression is not CompressionType.NONE and records:
            records_area = compress(compression, records_area)
    size = RECORD_BATCH_OVERHEAD + len(records_area)
    header = bytearray(
        BATCH_HEADER.pack(
            base_offset,
            size - LOG_OVERHEAD,
            partition_leader_epoch,
            CURRENT_MAGIC,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    )
    crc = crc32c_of(header[21:])
    crc = crc32c_of(records_area, crc)
    _CRC.pack_into(header, 17, crc)
    return bytes(header) + records_area

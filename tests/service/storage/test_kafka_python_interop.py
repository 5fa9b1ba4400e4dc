"""The independent check: kafka-python reads the batches we write, and we read the batches it writes.

kafka-python's ``kafka.record`` is a separate implementation of DefaultRecordBatch/DefaultRecord, with its
own varints, CRC-32C and codec framing; every test runs once per codec.
"""

from __future__ import annotations

import struct
import warnings
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.storage.compression import CompressionType
from service.storage.control import encode_end_txn_marker_batch
from service.storage.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Header,
    Record,
    RecordBatch,
    TimestampType,
    decode_batch,
    encode_batch,
    iter_batches,
)

with warnings.catch_warnings():
    # kafka-python 3.0 imports its admin client, which calls the deprecated importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record import MemoryRecords, MemoryRecordsBuilder
    from kafka.record.default_records import ControlRecord, DefaultRecordBatch, DefaultRecordBatchBuilder

INT16_MAX = (1 << 15) - 1
INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1

CODECS = list(CompressionType)
codecs = pytest.mark.parametrize("codec", CODECS, ids=[codec.label for codec in CODECS])

# Compressible values, so kafka-python (which sends a batch uncompressed when compression does not pay)
# really uses the codec.
RECORDS = [
    Record(1000, 1_700_000_000_000, b"key-1", b"value one " * 30, (Header("trace", b"abc"),)),
    Record(1001, 1_700_000_000_007, None, b"value two " * 30),
    Record(1002, 1_699_999_999_995, b"key-3", None, (Header("ünïcödé", None), Header("", b""))),
    Record(1005, 1_700_000_000_020, b"", b"", ()),
    Record(1009, 1_700_000_000_021, b"key-5", b"value five " * 30, (Header("a", b"1"), Header("a", b"2"))),
]


@dataclass(frozen=True)
class KafkaPythonRecord:
    """What kafka-python reports for one record, in our terms."""

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


def _read_with_kafka_python(buffer: bytes) -> list[tuple[Any, list[KafkaPythonRecord]]]:
    """Every batch in ``buffer`` as kafka-python reads it; each batch's CRC checked first, as it requires."""
    batches: list[tuple[Any, list[KafkaPythonRecord]]] = []
    memory_records = MemoryRecords(buffer)
    for batch in memory_records:
        assert isinstance(batch, DefaultRecordBatch)
        assert batch.validate_crc()
        records = [
            KafkaPythonRecord(
                r.offset,
                r.timestamp,
                r.timestamp_type,
                r.key,
                r.value,
                tuple(Header(key, value) for key, value in r.headers),
            )
            for r in batch
        ]
        batches.append((batch, records))
    assert memory_records.valid_bytes() == len(buffer)
    return batches


def _as_kafka_python_records(records: list[Record], timestamp_type: TimestampType) -> list[KafkaPythonRecord]:
    return [
        KafkaPythonRecord(r.offset, r.timestamp, int(timestamp_type), r.key, r.value, r.headers)
        for r in records
    ]


def _build_with_kafka_python(
    records: list[Record],
    codec: CompressionType,
    *,
    is_transactional: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """One batch from kafka-python's builder; offsets become offset deltas (it writes base offset 0)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=is_transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for record in records:
        metadata = builder.append(
            record.offset, record.timestamp, record.key, record.value, [tuple(h) for h in record.headers]
        )
        assert metadata is not None
    return bytes(builder.build())


def _assert_header_matches(ours: RecordBatch, theirs: Any) -> None:
    assert ours.base_offset == theirs.base_offset
    assert ours.size_bytes == theirs.size_in_bytes
    assert ours.partition_leader_epoch == theirs.leader_epoch
    assert ours.magic == theirs.magic == 2
    assert ours.crc == theirs.crc
    assert ours.attributes == theirs.attributes
    assert int(ours.compression) == theirs.compression_type
    assert int(ours.timestamp_type) == theirs.timestamp_type
    assert ours.is_transactional == theirs.is_transactional
    assert ours.is_control == theirs.is_control_batch
    assert ours.last_offset_delta == theirs.last_offset_delta
    assert ours.last_offset == theirs.last_offset
    assert ours.next_offset == theirs.next_offset
    assert ours.base_timestamp == theirs.first_timestamp
    assert ours.max_timestamp == theirs.max_timestamp
    assert ours.producer_id == theirs.producer_id
    assert ours.has_producer_id == theirs.has_producer_id()
    assert ours.producer_epoch == theirs.producer_epoch
    assert ours.base_sequence == theirs.base_sequence
    assert ours.last_sequence == theirs.last_sequence
    assert ours.records_count == theirs.records_count


# --- kafka-python reads what we write ----------------------------------------------------------------------


@codecs
def test_kafka_python_reads_our_batch(codec: CompressionType) -> None:
    encoded = encode_batch(
        RECORDS,
        compression=codec,
        producer_id=123_456_789,
        producer_epoch=4,
        base_sequence=77,
        is_transactional=True,
        partition_leader_epoch=12,
    )
    [(theirs, their_records)] = _read_with_kafka_python(encoded)
    ours = decode_batch(encoded)
    _assert_header_matches(ours, theirs)
    assert theirs.compression_type == int(codec)
    assert theirs.is_transactional
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (123_456_789, 4, 77)
    assert theirs.leader_epoch == 12
    assert theirs.records_count == len(RECORDS)
    assert their_records == _as_kafka_python_records(RECORDS, TimestampType.CREATE_TIME)


@codecs
def test_kafka_python_reads_our_log_append_time_batch(codec: CompressionType) -> None:
    encoded = encode_batch(
        RECORDS,
        compression=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        max_timestamp=1_800_000_000_000,
    )
    [(theirs, their_records)] = _read_with_kafka_python(encoded)
    _assert_header_matches(decode_batch(encoded), theirs)
    assert theirs.timestamp_type == 1
    assert [r.timestamp for r in their_records] == [1_800_000_000_000] * len(RECORDS)
    assert their_records == _as_kafka_python_records(
        [r._replace(timestamp=1_800_000_000_000) for r in RECORDS], TimestampType.LOG_APPEND_TIME
    )


@codecs
def test_kafka_python_reads_our_wrapping_sequence_and_long_offset_delta(codec: CompressionType) -> None:
    encoded = encode_batch(
        RECORDS,
        compression=codec,
        producer_id=1,
        producer_epoch=0,
        base_sequence=INT32_MAX - 3,
        last_offset_delta=20,
    )
    [(theirs, their_records)] = _read_with_kafka_python(encoded)
    ours = decode_batch(encoded)
    _assert_header_matches(ours, theirs)
    assert ours.last_sequence == theirs.last_sequence == 16
    assert theirs.last_offset == 1020
    assert their_records == _as_kafka_python_records(RECORDS, TimestampType.CREATE_TIME)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_kafka_python_reads_our_transaction_marker(commit: bool) -> None:
    encoded = encode_end_txn_marker_batch(
        offset=500,
        producer_id=99,
        producer_epoch=2,
        commit=commit,
        timestamp=1_700_000_000_000,
        coordinator_epoch=3,
    )
    memory_records = MemoryRecords(encoded)
    [theirs] = list(memory_records)
    assert theirs.validate_crc()
    _assert_header_matches(decode_batch(encoded), theirs)
    [record] = list(theirs)
    assert isinstance(record, ControlRecord)
    assert (record.offset, record.version) == (500, 0)
    assert (record.commit, record.abort) == (commit, not commit)
    assert record.value == struct.pack(">hi", 0, 3)


def test_kafka_python_reads_our_multi_batch_buffer() -> None:
    batches = []
    offset = 0
    for index, codec in enumerate(CODECS * 2):
        records = [r._replace(offset=offset + (r.offset - 1000)) for r in RECORDS]
        batches.append(
            encode_batch(
                records,
                compression=codec,
                partition_leader_epoch=index,
                timestamp_type=TimestampType(index % 2),
                max_timestamp=None if index % 2 == 0 else 1_750_000_000_000,
            )
        )
        offset = records[-1].offset + 1
    batches.append(encode_batch([], base_offset=offset, last_offset_delta=3, max_timestamp=5))
    batches.append(
        encode_end_txn_marker_batch(
            offset=offset + 4, producer_id=1, producer_epoch=0, commit=True, timestamp=6
        )
    )
    buffer = b"".join(batches)

    theirs = _read_with_kafka_python(buffer)
    ours = list(iter_batches(buffer))
    assert len(theirs) == len(ours) == len(batches)
    for our_batch, (their_batch, their_records) in zip(ours, theirs, strict=True):
        _assert_header_matches(our_batch, their_batch)
        assert their_records == _as_kafka_python_records(our_batch.records(), our_batch.timestamp_type)


timestamps = st.one_of(st.just(-1), st.integers(0, 1 << 45))
nullable_bytes = st.one_of(st.none(), st.binary(max_size=40))
header_lists = st.lists(
    st.builds(Header, st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=12))), max_size=3
).map(tuple)


@st.composite
def record_lists(draw: st.DrawFn, base_offset: int | None = None) -> list[Record]:
    count = draw(st.integers(1, 6))
    offset = draw(st.integers(0, 1 << 40)) if base_offset is None else base_offset
    records = []
    for _ in range(count):
        records.append(
            Record(offset, draw(timestamps), draw(nullable_bytes), draw(nullable_bytes), draw(header_lists))
        )
        offset += draw(st.integers(1, 1000))
    return records


@codecs
@settings(max_examples=25, deadline=None)
@given(
    records=record_lists(),
    producer_id=st.one_of(st.just(-1), st.integers(0, INT64_MAX)),
    producer_epoch=st.integers(-1, INT16_MAX),
    base_sequence=st.one_of(st.just(-1), st.integers(0, INT32_MAX)),
    flags=st.integers(0, 3),
    partition_leader_epoch=st.integers(-1, INT32_MAX),
)
def test_kafka_python_reads_any_batch_we_write(
    codec: CompressionType,
    records: list[Record],
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    flags: int,
    partition_leader_epoch: int,
) -> None:
    encoded = encode_batch(
        records,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=bool(flags & 1),
        timestamp_type=TimestampType(flags >> 1),
        max_timestamp=1_234 if flags >> 1 else None,
        partition_leader_epoch=partition_leader_epoch,
    )
    [(theirs, their_records)] = _read_with_kafka_python(encoded)
    ours = decode_batch(encoded)
    _assert_header_matches(ours, theirs)
    assert their_records == _as_kafka_python_records(ours.records(), ours.timestamp_type)


# --- we read what kafka-python writes ----------------------------------------------------------------------


@codecs
def test_we_read_kafka_pythons_batch(codec: CompressionType) -> None:
    records = [r._replace(offset=r.offset - 1000) for r in RECORDS]  # kafka-python writes base offset 0
    built = _build_with_kafka_python(
        records, codec, is_transactional=True, producer_id=987_654, producer_epoch=3, base_sequence=40
    )
    batch = decode_batch(built)
    assert batch.is_crc_valid()
    assert batch.compression is codec
    assert batch.is_transactional
    assert not batch.is_control
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert (batch.base_offset, batch.partition_leader_epoch) == (0, 0)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (987_654, 3, 40)
    assert batch.last_offset_delta == records[-1].offset
    assert batch.last_sequence == 40 + records[-1].offset
    assert batch.base_timestamp == records[0].timestamp
    assert batch.max_timestamp == max(r.timestamp for r in records)
    assert batch.records_count == len(records)
    assert batch.size_bytes == len(built)
    assert batch.records() == records
    [(theirs, _)] = _read_with_kafka_python(built)
    _assert_header_matches(batch, theirs)


def test_uncompressed_batches_are_byte_identical_to_kafka_pythons() -> None:
    records = [r._replace(offset=r.offset - 1000) for r in RECORDS]
    built = _build_with_kafka_python(
        records, CompressionType.NONE, is_transactional=True, producer_id=5, producer_epoch=1, base_sequence=0
    )
    ours = encode_batch(
        records,
        partition_leader_epoch=0,
        is_transactional=True,
        producer_id=5,
        producer_epoch=1,
        base_sequence=0,
    )
    assert ours == built


@codecs
def test_we_read_memory_records_builder_output(codec: CompressionType) -> None:
    builder = MemoryRecordsBuilder(
        magic=2,
        compression_type=int(codec),
        batch_size=1 << 20,
        offset=250,
        transactional=False,
        producer_id=42,
        producer_epoch=7,
        base_sequence=INT32_MAX - 1,
    )
    for record in RECORDS:
        assert builder.append(record.timestamp, record.key, record.value, [tuple(h) for h in record.headers])
    builder.close()
    built = bytes(builder.buffer())
    batch = decode_batch(built)
    assert batch.is_crc_valid()
    assert batch.compression is codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 7, INT32_MAX - 1)
    # kafka-python leaves the base offset to the broker (0) and writes the offsets as deltas.
    assert batch.base_offset == 0
    assert batch.last_sequence == (INT32_MAX - 1 + batch.last_offset_delta) % (INT32_MAX + 1)
    expected = [r._replace(offset=250 + index) for index, r in enumerate(RECORDS)]
    assert batch.records() == expected


def test_we_read_a_multi_batch_buffer_kafka_python_wrote() -> None:
    parts = []
    expected: list[list[Record]] = []
    base_offset = 0
    for index, codec in enumerate(CODECS * 2):
        records = [r._replace(offset=r.offset - 1000) for r in RECORDS[index % 3 :]]
        built = bytearray(
            _build_with_kafka_python(
                records, codec, producer_id=index, producer_epoch=0, base_sequence=index * 10
            )
        )
        # A broker assigns the base offset and leader epoch, neither covered by the CRC.
        struct.pack_into(">q", built, 0, base_offset)
        struct.pack_into(">i", built, 12, index)
        parts.append(bytes(built))
        expected.append([r._replace(offset=base_offset + r.offset) for r in records])
        base_offset += records[-1].offset + 1
    buffer = b"".join(parts)

    batches = list(iter_batches(buffer, base_position=0))
    assert len(batches) == len(parts)
    position = 0
    for index, (batch, records) in enumerate(zip(batches, expected, strict=True)):
        assert batch.is_crc_valid()
        assert batch.position == position
        assert batch.compression is CODECS[index % len(CODECS)]
        assert (batch.producer_id, batch.base_sequence, batch.partition_leader_epoch) == (
            index,
            index * 10,
            index,
        )
        assert batch.records() == records
        position += batch.size_bytes
    assert position == len(buffer)

    for our_batch, (their_batch, their_records) in zip(batches, _read_with_kafka_python(buffer), strict=True):
        _assert_header_matches(our_batch, their_batch)
        assert their_records == _as_kafka_python_records(our_batch.records(), TimestampType.CREATE_TIME)


@codecs
@settings(max_examples=25, deadline=None)
@given(
    records=record_lists(base_offset=0),
    is_transactional=st.booleans(),
    producer_epoch=st.integers(0, INT16_MAX),
    base_sequence=st.integers(0, INT32_MAX),
)
def test_we_read_any_batch_kafka_python_writes(
    codec: CompressionType,
    records: list[Record],
    is_transactional: bool,
    producer_epoch: int,
    base_sequence: int,
) -> None:
    built = _build_with_kafka_python(
        records,
        codec,
        is_transactional=is_transactional,
        producer_id=1000,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    batch = decode_batch(built)
    assert batch.is_crc_valid()
    # kafka-python sends a batch uncompressed when the codec would not shrink it.
    assert batch.compression in (codec, CompressionType.NONE)
    assert batch.is_transactional is is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        1000,
        producer_epoch,
        base_sequence,
    )
    assert batch.records() == records
    [(theirs, _)] = _read_with_kafka_python(built)
    _assert_header_matches(batch, theirs)

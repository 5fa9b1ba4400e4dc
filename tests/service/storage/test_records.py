"""v2 record batches: the reference vector, round trips over every header field and codec, clean failures."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import crc32c
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from service.base.errors import CorruptDataError, UnsupportedFormatError
from service.storage.compression import CompressionType
from service.storage.records import (
    BATCH_HEADER,
    LOG_OVERHEAD,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    Header,
    Record,
    RecordBatch,
    TimestampType,
    decode_batch,
    decode_records,
    encode_batch,
    encode_records,
    iter_batches,
    peek_batch_size,
)

INT16_MAX = (1 << 15) - 1
INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)
INT64_MAX = (1 << 63) - 1

CODECS = list(CompressionType)
CODEC_IDS = [codec.label for codec in CODECS]
codecs = pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)

# Section 3.3 of the semantics doc: two records, (1000, "k1", "v1") and (1005, "k2", null).
REFERENCE_VECTOR = bytes.fromhex(
    "0000000000000000 00000045 00000000 02 b0db168e 0000 00000001 00000000000003e8 00000000000003ed"
    "ffffffffffffffff ffff ffffffff 00000002"
    "14 00 00 00 04 6b31 04 7631 00"
    "10 00 0a 02 04 6b32 01 00"
)
REFERENCE_RECORDS = [Record(0, 1000, b"k1", b"v1"), Record(1, 1005, b"k2", None)]

SAMPLE_RECORDS = [
    Record(100, 1_700_000_000_000, b"key-a", b"value-a" * 20, (Header("h1", b"x"), Header("h2", None))),
    Record(101, 1_700_000_000_005, None, b"value-b" * 20),
    Record(105, 1_699_999_999_990, b"key-c", None, (Header("ünï", b""),)),
    Record(110, NO_TIMESTAMP, b"", b"value-d" * 20),
]


# --- strategies -------------------------------------------------------------------------------------------

timestamps = st.one_of(
    st.just(NO_TIMESTAMP),
    st.integers(0, 1 << 45),
    st.integers(-(1 << 40), -2),
    st.integers(1_600_000_000_000, 1_800_000_000_000),
)
nullable_bytes = st.one_of(st.none(), st.binary(max_size=48))
headers = st.lists(
    st.builds(Header, st.text(max_size=12), st.one_of(st.none(), st.binary(max_size=16))), max_size=3
).map(tuple)


@st.composite
def record_lists(draw: st.DrawFn, min_size: int = 1, max_size: int = 8) -> list[Record]:
    """Records with increasing offsets (gaps allowed, as after compaction) and timestamps in any order."""
    count = draw(st.integers(min_size, max_size))
    offset = draw(st.one_of(st.integers(0, 1000), st.integers(0, 1 << 62)))
    records = []
    for _ in range(count):
        records.append(
            Record(offset, draw(timestamps), draw(nullable_bytes), draw(nullable_bytes), draw(headers))
        )
        offset += draw(st.one_of(st.just(1), st.integers(1, 1 << 20)))
    return records


@dataclass(frozen=True)
class BatchArgs:
    timestamp_type: TimestampType
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    partition_leader_epoch: int
    delete_horizon_ms: int | None
    extra_offset_delta: int
    append_time_ms: int


batch_args = st.builds(
    BatchArgs,
    timestamp_type=st.sampled_from(TimestampType),
    producer_id=st.one_of(st.just(NO_PRODUCER_ID), st.integers(0, INT64_MAX)),
    producer_epoch=st.one_of(st.just(NO_PRODUCER_EPOCH), st.integers(0, INT16_MAX)),
    base_sequence=st.one_of(st.just(NO_SEQUENCE), st.integers(0, INT32_MAX), st.just(INT32_MAX)),
    is_transactional=st.booleans(),
    is_control=st.booleans(),
    partition_leader_epoch=st.one_of(st.just(-1), st.integers(INT32_MIN, INT32_MAX)),
    delete_horizon_ms=st.one_of(st.none(), st.integers(0, 1 << 45)),
    extra_offset_delta=st.one_of(st.just(0), st.integers(1, 1 << 20)),
    append_time_ms=st.integers(0, 1 << 45),
)


def _wrap_records_area(
    area: bytes, *, count: int, attributes: int = 0, base_offset: int = 0, base_timestamp: int = 0
) -> bytes:
    """A batch header with a valid CRC around ``area``, built without encode_batch."""
    header = bytearray(
        BATCH_HEADER.pack(
            base_offset,
            RECORD_BATCH_OVERHEAD + len(area) - LOG_OVERHEAD,
            -1,
            2,
            0,
            attributes,
            max(count - 1, 0),
            base_timestamp,
            base_timestamp,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            NO_SEQUENCE,
            count,
        )
    )
    struct.pack_into(">I", header, 17, crc32c.crc32c(bytes(header[21:]) + area))
    return bytes(header) + area


def _flip(data: bytes, position: int, mask: int = 0xFF) -> bytes:
    flipped = bytearray(data)
    flipped[position] ^= mask
    return bytes(flipped)


def _legacy_message(magic: int, offset: int, value: bytes) -> bytes:
    """A magic 0/1 message (its own message set), with its zlib CRC-32."""
    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", 1_700_000_000_000)
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


# --- the reference vector ---------------------------------------------------------------------------------


def test_reference_vector_encodes_byte_for_byte() -> None:
    encoded = encode_batch(REFERENCE_RECORDS, partition_leader_epoch=0)
    assert len(encoded) == 81
    assert encoded == REFERENCE_VECTOR


def test_reference_vector_decodes() -> None:
    batch = decode_batch(REFERENCE_VECTOR)
    assert (
        batch.base_offset,
        batch.batch_length,
        batch.partition_leader_epoch,
        batch.magic,
        batch.crc,
        batch.attributes,
        batch.last_offset_delta,
        batch.base_timestamp,
        batch.max_timestamp,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        batch.records_count,
    ) == (0, 0x45, 0, 2, 0xB0DB168E, 0, 1, 1000, 1005, -1, -1, -1, 2)
    assert batch.is_crc_valid()
    assert batch.size_bytes == 81
    assert batch.data == REFERENCE_VECTOR
    assert batch.compression is CompressionType.NONE
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert not batch.is_transactional
    assert not batch.is_control
    assert not batch.has_delete_horizon
    assert batch.delete_horizon_ms is None
    assert not batch.has_producer_id
    assert batch.last_sequence == NO_SEQUENCE
    assert (batch.last_offset, batch.next_offset) == (1, 2)
    assert batch.records() == REFERENCE_RECORDS
    assert peek_batch_size(REFERENCE_VECTOR) == 81


@pytest.mark.parametrize(
    ("key_size", "value_size", "batch_size"), [(None, 4, 72), (4, 4, 76), (5, 5, 78)], ids=str
)
def test_size_examples_from_the_semantics_doc(key_size: int | None, value_size: int, batch_size: int) -> None:
    key = None if key_size is None else b"k" * key_size
    assert len(encode_batch([Record(0, 0, key, b"v" * value_size)])) == batch_size


# --- round trips ------------------------------------------------------------------------------------------


@codecs
@settings(max_examples=40, deadline=None)
@given(records=record_lists(), args=batch_args)
def test_batch_round_trip(codec: CompressionType, records: list[Record], args: BatchArgs) -> None:
    span = records[-1].offset - records[0].offset
    last_offset_delta = span + args.extra_offset_delta
    log_append_time = args.timestamp_type is TimestampType.LOG_APPEND_TIME
    encoded = encode_batch(
        records,
        compression=codec,
        timestamp_type=args.timestamp_type,
        producer_id=args.producer_id,
        producer_epoch=args.producer_epoch,
        base_sequence=args.base_sequence,
        is_transactional=args.is_transactional,
        is_control=args.is_control,
        partition_leader_epoch=args.partition_leader_epoch,
        delete_horizon_ms=args.delete_horizon_ms,
        last_offset_delta=last_offset_delta,
        max_timestamp=args.append_time_ms if log_append_time else None,
    )
    batch = decode_batch(encoded, position=4096)

    expected_attributes = int(codec) | (int(args.timestamp_type) << 3)
    expected_attributes |= 0x10 if args.is_transactional else 0
    expected_attributes |= 0x20 if args.is_control else 0
    expected_attributes |= 0x40 if args.delete_horizon_ms is not None else 0
    expected_max_timestamp = args.append_time_ms if log_append_time else max(r.timestamp for r in records)
    expected_base_timestamp = (
        records[0].timestamp if args.delete_horizon_ms is None else args.delete_horizon_ms
    )
    assert batch.base_offset == records[0].offset
    assert batch.batch_length == len(encoded) - LOG_OVERHEAD
    assert batch.size_bytes == len(encoded) == peek_batch_size(encoded)
    assert batch.partition_leader_epoch == args.partition_leader_epoch
    assert batch.magic == 2
    assert batch.is_crc_valid()
    assert batch.crc == batch.computed_crc()
    assert batch.attributes == expected_attributes
    assert batch.compression is codec
    assert batch.timestamp_type is args.timestamp_type
    assert batch.is_transactional is args.is_transactional
    assert batch.is_control is args.is_control
    assert batch.has_delete_horizon is (args.delete_horizon_ms is not None)
    assert batch.delete_horizon_ms == args.delete_horizon_ms
    assert batch.last_offset_delta == last_offset_delta
    assert batch.last_offset == records[0].offset + last_offset_delta
    assert batch.next_offset == batch.last_offset + 1
    assert batch.base_timestamp == expected_base_timestamp
    assert batch.max_timestamp == expected_max_timestamp
    assert batch.producer_id == args.producer_id
    assert batch.has_producer_id is (args.producer_id != NO_PRODUCER_ID)
    assert batch.producer_epoch == args.producer_epoch
    assert batch.base_sequence == args.base_sequence
    if args.base_sequence == NO_SEQUENCE:
        assert batch.last_sequence == NO_SEQUENCE
    else:
        assert batch.last_sequence == (args.base_sequence + last_offset_delta) % (INT32_MAX + 1)
    assert batch.records_count == len(records)
    assert batch.position == 4096
    assert batch.data == encoded

    decoded = batch.records()
    if log_append_time:
        assert decoded == [r._replace(timestamp=args.append_time_ms) for r in records]
    else:
        assert decoded == records


@settings(max_examples=100)
@given(records=record_lists(min_size=0), base_timestamp=timestamps)
def test_encode_records_round_trip(records: list[Record], base_timestamp: int) -> None:
    base_offset = records[0].offset if records else 0
    raw = encode_records(records, base_offset, base_timestamp)
    assert decode_records(raw, len(records), base_offset, base_timestamp) == records


@codecs
def test_records_area_can_be_reused_under_a_new_header(codec: CompressionType) -> None:
    original = decode_batch(encode_batch(SAMPLE_RECORDS, compression=codec))
    rewritten = encode_batch(
        SAMPLE_RECORDS,
        compression=codec,
        producer_id=7,
        producer_epoch=3,
        base_sequence=10,
        records_area=original.data[RECORD_BATCH_OVERHEAD:],
    )
    batch = decode_batch(rewritten)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 10)
    assert batch.data[RECORD_BATCH_OVERHEAD:] == original.data[RECORD_BATCH_OVERHEAD:]
    assert batch.records() == SAMPLE_RECORDS


@pytest.mark.parametrize(
    ("base_sequence", "last_offset_delta", "last_sequence"),
    [
        (0, 0, 0),
        (5, 10, 15),
        (INT32_MAX, 0, INT32_MAX),
        (INT32_MAX - 1, 1, INT32_MAX),
        (INT32_MAX, 1, 0),
        (INT32_MAX - 2, 5, 2),
        (INT32_MAX, INT32_MAX, INT32_MAX - 1),
        (NO_SEQUENCE, 5, NO_SEQUENCE),
    ],
    ids=str,
)
def test_last_sequence_wraps_past_int32_max(
    base_sequence: int, last_offset_delta: int, last_sequence: int
) -> None:
    encoded = encode_batch(
        [Record(0, 1, b"k", b"v")],
        producer_id=1,
        producer_epoch=0,
        base_sequence=base_sequence,
        last_offset_delta=last_offset_delta,
    )
    assert decode_batch(encoded).last_sequence == last_sequence


def test_last_offset_delta_larger_than_the_records_span_is_kept() -> None:
    records = [Record(10, 1, b"a", b"1"), Record(12, 2, b"b", b"2")]
    batch = decode_batch(encode_batch(records, last_offset_delta=9))
    assert (batch.base_offset, batch.last_offset_delta, batch.last_offset, batch.next_offset) == (
        10,
        9,
        19,
        20,
    )
    assert batch.records() == records


def test_base_offset_below_the_first_record_is_kept() -> None:
    records = [Record(10, 1, b"a", b"1"), Record(12, 2, b"b", b"2")]
    batch = decode_batch(encode_batch(records, base_offset=8))
    assert (batch.base_offset, batch.last_offset) == (8, 12)
    assert batch.records() == records


# --- empty batches ----------------------------------------------------------------------------------------


@settings(max_examples=100)
@given(
    base_offset=st.integers(0, 1 << 62),
    last_offset_delta=st.integers(0, INT32_MAX),
    max_timestamp=timestamps,
    args=batch_args,
)
def test_empty_batch_round_trip(
    base_offset: int, last_offset_delta: int, max_timestamp: int, args: BatchArgs
) -> None:
    encoded = encode_batch(
        [],
        base_offset=base_offset,
        last_offset_delta=last_offset_delta,
        max_timestamp=max_timestamp,
        timestamp_type=args.timestamp_type,
        producer_id=args.producer_id,
        producer_epoch=args.producer_epoch,
        base_sequence=args.base_sequence,
        is_transactional=args.is_transactional,
        is_control=args.is_control,
        partition_leader_epoch=args.partition_leader_epoch,
    )
    assert len(encoded) == RECORD_BATCH_OVERHEAD
    batch = decode_batch(encoded)
    assert batch.records_count == 0
    assert batch.base_timestamp == NO_TIMESTAMP
    assert batch.max_timestamp == max_timestamp
    assert batch.compression is CompressionType.NONE
    assert not batch.has_delete_horizon
    assert batch.timestamp_type is args.timestamp_type
    assert (batch.base_offset, batch.last_offset_delta) == (base_offset, last_offset_delta)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        args.producer_id,
        args.producer_epoch,
        args.base_sequence,
    )
    assert (batch.is_transactional, batch.is_control) == (args.is_transactional, args.is_control)
    assert batch.partition_leader_epoch == args.partition_leader_epoch
    assert batch.is_crc_valid()
    assert batch.records() == []


@codecs
def test_empty_batch_with_a_codec_attribute_reads_as_empty(codec: CompressionType) -> None:
    """Kafka's DefaultRecordBatch iterates no records when recordsCount is 0, whatever the codec bits say."""
    encoded = encode_batch([], base_offset=3, last_offset_delta=2, compression=codec)
    batch = decode_batch(encoded)
    assert batch.compression is codec
    assert batch.records() == []


def test_empty_batch_needs_base_offset_and_last_offset_delta() -> None:
    with pytest.raises(ValueError, match="base_offset"):
        encode_batch([], last_offset_delta=0)
    with pytest.raises(ValueError, match="last_offset_delta"):
        encode_batch([], base_offset=0)


# --- LogAppendTime ------------------------------------------------------------------------------------------


@codecs
@settings(max_examples=20, deadline=None)
@given(records=record_lists(), append_time_ms=st.integers(0, 1 << 45))
def test_log_append_time_gives_every_record_the_max_timestamp(
    codec: CompressionType, records: list[Record], append_time_ms: int
) -> None:
    encoded = encode_batch(
        records, compression=codec, timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=append_time_ms
    )
    batch = decode_batch(encoded)
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.attributes & 0x08
    assert batch.max_timestamp == append_time_ms
    decoded = batch.records()
    assert [r.timestamp for r in decoded] == [append_time_ms] * len(records)
    assert [r._replace(timestamp=0) for r in decoded] == [r._replace(timestamp=0) for r in records]


def test_timestamp_type_labels() -> None:
    assert [t.label for t in TimestampType] == ["CreateTime", "LogAppendTime"]


# --- arbitrary bytes ----------------------------------------------------------------------------------------

_VALID = encode_batch(SAMPLE_RECORDS)
_VALID_GZIP = encode_batch(SAMPLE_RECORDS, compression=CompressionType.GZIP)


@st.composite
def mangled_batches(draw: st.DrawFn) -> bytes:
    """Valid batches with some bytes overwritten, cut or extended: deeper than pure noise gets."""
    data = bytearray(draw(st.sampled_from([_VALID, _VALID_GZIP, REFERENCE_VECTOR])))
    for _ in range(draw(st.integers(0, 4))):
        position = draw(st.integers(0, len(data) - 1))
        data[position] = draw(st.integers(0, 255))
    return bytes(data[: draw(st.integers(0, len(data)))]) + draw(st.binary(max_size=40))


arbitrary_buffers = st.one_of(
    st.binary(max_size=200),
    mangled_batches(),
    st.binary(min_size=17, max_size=120).map(lambda b: b[:16] + b"\x02" + b[17:]),
)


@settings(max_examples=200)
@given(data=arbitrary_buffers, position=st.integers(0, 1 << 20))
def test_arbitrary_bytes_to_decode_batch_raise_only_corrupt_data_error(data: bytes, position: int) -> None:
    try:
        batch = decode_batch(data, position=position)
    except CorruptDataError as exc:
        assert exc.position is not None
        assert exc.position >= position
        return
    assert batch.is_crc_valid()
    try:
        batch.records()
    except CorruptDataError as exc:
        assert exc.position is not None
        assert exc.position >= position


@settings(max_examples=200)
@given(data=arbitrary_buffers)
def test_arbitrary_bytes_to_iter_batches_raise_only_corrupt_data_error(data: bytes) -> None:
    buffer = _VALID + data
    try:
        batches = list(iter_batches(buffer, base_position=100))
    except CorruptDataError as exc:
        assert exc.position is not None
        assert exc.position >= 100 + len(_VALID)
        return
    assert sum(batch.size_bytes for batch in batches) == len(buffer)


@settings(max_examples=200)
@given(data=arbitrary_buffers)
def test_arbitrary_bytes_without_crc_check_raise_only_corrupt_data_error(data: bytes) -> None:
    try:
        batch = decode_batch(data, verify_crc=False)
        batch.records()
    except CorruptDataError as exc:
        assert exc.position is not None


@settings(max_examples=200, deadline=None)
@given(
    area=st.one_of(
        st.binary(max_size=4),
        st.binary(max_size=120),
        st.sampled_from([_VALID[RECORD_BATCH_OVERHEAD:], _VALID_GZIP[RECORD_BATCH_OVERHEAD:]]).flatmap(
            lambda area: st.integers(0, len(area)).map(lambda cut: area[:cut])
        ),
    ),
    count=st.one_of(st.integers(0, 8), st.integers(0, INT32_MAX)),
    codec_id=st.integers(0, 7),
    log_append_time=st.booleans(),
)
@example(area=b"\x00", count=1, codec_id=0, log_append_time=False)
def test_garbage_records_area_with_a_valid_crc_raises_only_corrupt_data_error(
    area: bytes, count: int, codec_id: int, log_append_time: bool
) -> None:
    attributes = codec_id | (0x08 if log_append_time else 0)
    garbage_batch = _wrap_records_area(area, count=count, attributes=attributes, base_offset=50)
    first, batch = iter_batches(_VALID + garbage_batch, base_position=1000)
    assert first.records() == SAMPLE_RECORDS
    assert batch.is_crc_valid()
    assert batch.position == 1000 + len(_VALID)
    try:
        records = batch.records()
    except CorruptDataError as exc:
        assert exc.position is not None
        assert exc.position >= batch.position
        assert f"position {exc.position}" in str(exc)
        if codec_id == 0:
            assert exc.position <= batch.position + batch.size_bytes
        return
    assert len(records) == count


def test_decompression_failure_names_the_records_area_position() -> None:
    garbage = _wrap_records_area(b"not gzip at all", count=1, attributes=int(CompressionType.GZIP))
    _, batch = iter_batches(_VALID + garbage, base_position=1000)
    with pytest.raises(CorruptDataError, match="gzip") as caught:
        batch.records()
    assert caught.value.position == batch.position + RECORD_BATCH_OVERHEAD


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_names_the_attributes_position(codec_id: int) -> None:
    garbage = _wrap_records_area(b"\x00" * 8, count=1, attributes=codec_id)
    _, batch = iter_batches(_VALID + garbage, base_position=1000)
    with pytest.raises(CorruptDataError, match=f"unknown compression codec id {codec_id}") as caught:
        batch.records()
    assert caught.value.position == batch.position + 21


def test_record_error_in_a_later_batch_names_its_position() -> None:
    # One record whose length varint says 1 byte, too short for its own fields.
    garbage = _wrap_records_area(b"\x02\x00\x00", count=1)
    _, batch = iter_batches(_VALID + garbage, base_position=1000)
    with pytest.raises(CorruptDataError) as caught:
        batch.records()
    position = caught.value.position
    assert position is not None
    assert batch.position + RECORD_BATCH_OVERHEAD <= position < batch.position + batch.size_bytes + 2


@pytest.mark.parametrize(
    ("area", "count", "message"),
    [
        (b"", 1, "record 0 of 1: varint runs past the end"),
        (b"\x7f", 1, "runs past the batch end"),
        (b"\x01", 1, "record length -1"),
        (encode_records([Record(0, 0, b"k", b"v")], 0, 0) + b"\xff", 1, "1 bytes left after the 1 records"),
        (encode_records([Record(0, 0, b"k", b"v")], 0, 0), 2, "record 1 of 2: varint runs past the end"),
        (bytes.fromhex("10 00 00 00 03 6b 02 76 00"), 1, "invalid key length -2"),
        (bytes.fromhex("10 00 00 00 02 6b 03 76 00"), 1, "invalid value length -2"),
        (bytes.fromhex("0e 00 00 00 02 6b 02 76 00"), 1, "does not match its length 7"),
        (bytes.fromhex("10 00 00 00 02 6b 02 76 02"), 1, "runs past the end"),
        (bytes.fromhex("16 00 00 00 02 6b 02 76 02 02 ff 00"), 1, "not valid UTF-8"),
        (bytes.fromhex("10 00 00 00 02 6b 02 76 03"), 1, "invalid header count -2"),
        (bytes.fromhex("10 00 00 00 7e 6b 02 76 00"), 1, "record 0 of 1: varint runs past the end"),
        (b"\x00", 1, "varint runs past the end"),
        (bytes.fromhex("16 00 00 00 02 6b 02 76 02 02 68 7e"), 1, "does not match its length 11"),
    ],
    ids=[
        "empty-area",
        "length-past-end",
        "negative-length",
        "trailing-bytes",
        "missing-record",
        "key-length",
        "value-length",
        "length-mismatch",
        "header-truncated",
        "header-key-utf8",
        "header-count",
        "key-past-the-end",
        "zero-length-record",
        "header-value-past-the-end",
    ],
)
def test_malformed_records_raise_corrupt_data_error(area: bytes, count: int, message: str) -> None:
    batch = decode_batch(_VALID + _wrap_records_area(area, count=count), len(_VALID), position=500)
    with pytest.raises(CorruptDataError, match=message) as caught:
        batch.records()
    # The position lies in this batch's records area, even when a length points past its end.
    assert caught.value.position is not None
    assert 500 + RECORD_BATCH_OVERHEAD <= caught.value.position <= 500 + batch.size_bytes


# --- CRC ----------------------------------------------------------------------------------------------------


@codecs
def test_flipping_any_crc_covered_byte_is_a_crc_mismatch(codec: CompressionType) -> None:
    encoded = encode_batch(
        SAMPLE_RECORDS, compression=codec, producer_id=9, producer_epoch=1, base_sequence=0
    )
    for position in range(17, len(encoded)):
        with pytest.raises(CorruptDataError, match="CRC mismatch") as caught:
            decode_batch(_flip(encoded, position), position=777)
        assert caught.value.position == 777, position
        assert "position 777" in str(caught.value)


@settings(max_examples=200, deadline=None)
@given(
    records=record_lists(max_size=4),
    codec=st.sampled_from(CompressionType),
    data=st.data(),
    mask=st.integers(1, 255),
)
def test_flipping_bits_of_any_crc_covered_byte_is_a_crc_mismatch(
    records: list[Record], codec: CompressionType, data: st.DataObject, mask: int
) -> None:
    encoded = encode_batch(records, compression=codec)
    position = data.draw(st.integers(17, len(encoded) - 1))
    with pytest.raises(CorruptDataError, match="CRC mismatch") as caught:
        list(iter_batches(_VALID + _flip(encoded, position, mask), base_position=10))
    assert caught.value.position == 10 + len(_VALID)


@codecs
@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_partition_leader_epoch_is_not_covered_by_the_crc(codec: CompressionType, mask: int) -> None:
    encoded = encode_batch(SAMPLE_RECORDS, compression=codec, partition_leader_epoch=5)
    for position in range(12, 16):
        flipped = _flip(encoded, position, mask)
        batch = decode_batch(flipped)
        assert batch.is_crc_valid()
        assert batch.crc == decode_batch(encoded).crc
        assert batch.partition_leader_epoch != 5
        assert batch.records() == SAMPLE_RECORDS


def test_crc_check_can_be_skipped() -> None:
    flipped = _flip(_VALID, 40)
    batch = decode_batch(flipped, verify_crc=False)
    assert not batch.is_crc_valid()
    assert batch.computed_crc() != batch.crc


# --- formats and truncation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_set_is_unsupported_and_names_its_position(magic: int) -> None:
    message = _legacy_message(magic, 42, b"legacy value")
    with pytest.raises(UnsupportedFormatError, match=f"magic {magic}") as caught:
        decode_batch(message, position=1234)
    assert caught.value.position == 1234
    assert "position 1234" in str(caught.value)
    assert isinstance(caught.value, CorruptDataError)

    with pytest.raises(UnsupportedFormatError) as caught:
        list(iter_batches(_VALID + message))
    assert caught.value.position == len(_VALID)
    assert f"position {len(_VALID)}" in str(caught.value)


@pytest.mark.parametrize("magic", [3, 127, 255])
def test_unknown_magic_is_corrupt(magic: int) -> None:
    data = bytearray(_VALID)
    data[16] = magic
    with pytest.raises(CorruptDataError, match="magic") as caught:
        decode_batch(bytes(data), position=50)
    assert not isinstance(caught.value, UnsupportedFormatError)
    assert caught.value.position == 50 + 16


def test_every_truncation_is_incomplete() -> None:
    for cut in range(len(_VALID)):
        with pytest.raises(CorruptDataError, match="incomplete") as caught:
            decode_batch(_VALID[:cut], position=300)
        assert caught.value.position == 300, cut


def test_truncated_last_batch_in_a_buffer_is_incomplete() -> None:
    buffer = _VALID + REFERENCE_VECTOR[:-1]
    iterator = iter_batches(buffer, base_position=4000)
    assert next(iterator).records() == SAMPLE_RECORDS
    with pytest.raises(CorruptDataError, match="incomplete") as caught:
        next(iterator)
    assert caught.value.position == 4000 + len(_VALID)
    assert f"position {4000 + len(_VALID)}" in str(caught.value)


@pytest.mark.parametrize("batch_length", [-1, 0, 48, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD - 1])
def test_batch_length_below_the_header_size_is_corrupt(batch_length: int) -> None:
    data = bytearray(_VALID)
    struct.pack_into(">i", data, 8, batch_length)
    with pytest.raises(CorruptDataError, match="smaller than the 61-byte batch header"):
        decode_batch(bytes(data))


def test_negative_counts_are_corrupt() -> None:
    with pytest.raises(CorruptDataError, match="negative record count") as caught:
        decode_batch(_wrap_records_area(b"", count=-1))
    assert caught.value.position == 57


def test_iter_batches_reads_every_batch_in_order() -> None:
    batches = [
        encode_batch(SAMPLE_RECORDS, compression=codec, partition_leader_epoch=int(codec)) for codec in CODECS
    ]
    buffer = b"".join(batches)
    decoded = list(iter_batches(memoryview(buffer), base_position=8))
    assert [b.compression for b in decoded] == CODECS
    assert [b.position for b in decoded] == [8 + sum(map(len, batches[:i])) for i in range(len(batches))]
    assert all(b.records() == SAMPLE_RECORDS for b in decoded)
    assert list(iter_batches(b"")) == []


def test_record_batch_is_frozen() -> None:
    batch = decode_batch(_VALID)
    assert isinstance(batch, RecordBatch)
    with pytest.raises(AttributeError):
        batch.base_offset = 1  # type: ignore[misc]  # the point: frozen dataclasses refuse assignment

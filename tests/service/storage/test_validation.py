"""``validate_and_assign_offsets``: Kafka's ``LogValidator`` for magic v2 on the bytes of an append,
all or nothing: offsets assigned in place from the log end (the CRC stays valid), the leader's epoch
stamped, each batch held to ``max.message.bytes`` and the append to ``segment.bytes``, keys on compacted
topics, KIP-937's timestamp bounds for CreateTime, and LogAppendTime stamped from the log's clock."""

from __future__ import annotations

from typing import Any

import pytest

from service.base.errors import CorruptDataError, InvalidInputError, RecordTooLargeError
from service.storage.compression import CompressionType
from service.storage.control import encode_end_txn_marker_batch
from service.storage.log_config import LogConfig
from service.storage.records import (
    NO_TIMESTAMP,
    Record,
    TimestampType,
    decode_batch,
    encode_batch,
    encode_records,
)
from service.storage.validation import validate_and_assign_offsets

NOW_MS = 1_700_000_000_000
COMPACTED = LogConfig(cleanup_policy=frozenset({"compact"}))


def batch_of(*keys: bytes | None, timestamp: int = NOW_MS, **fields: Any) -> bytes:
    """One batch of records keyed ``keys`` (value ``b"v"``), offsets 0.. and the producer's fields."""
    records = [Record(i, timestamp, key, b"v") for i, key in enumerate(keys)]
    return encode_batch(records, **fields)


def test_offsets_are_assigned_from_the_log_end_across_batches() -> None:
    data = batch_of(b"a", b"b") + batch_of(b"c") + batch_of(b"d", b"e", b"f")
    validated = validate_and_assign_offsets(data, next_offset=100, config=LogConfig(), now_ms=NOW_MS)
    assert [(v.batch.base_offset, v.batch.last_offset) for v in validated] == [
        (100, 101),
        (102, 102),
        (103, 105),
    ]
    assert [v.record_offsets for v in validated] == [(100, 101), (102,), (103, 104, 105)]
    for v in validated:
        stored = decode_batch(v.data)  # what the segment will hold: a valid batch at its new offset
        assert stored.is_crc_valid() and stored.base_offset == v.batch.base_offset
        assert [r.offset for r in stored.records()] == list(v.record_offsets)


def test_the_base_offset_rewrite_keeps_the_producers_crc() -> None:
    """The base offset and the leader epoch lie outside the CRC (Kafka: ``setLastOffset`` and
    ``setPartitionLeaderEpoch`` in place): a CreateTime batch keeps its CRC."""
    raw = batch_of(b"a", producer_id=7, producer_epoch=1, base_sequence=3)
    (one,) = validate_and_assign_offsets(
        raw, next_offset=42, config=LogConfig(), now_ms=NOW_MS, partition_leader_epoch=5
    )
    assert one.batch.crc == decode_batch(raw).crc
    assert (one.batch.partition_leader_epoch, one.batch.producer_id, one.batch.base_sequence) == (5, 7, 3)
    assert one.data[12:] != raw[12:] and one.data[21:] == raw[21:], "only the header's prefix changed"


def test_without_a_leader_epoch_the_producers_is_kept() -> None:
    raw = batch_of(b"a", partition_leader_epoch=9)
    (one,) = validate_and_assign_offsets(raw, next_offset=0, config=LogConfig(), now_ms=NOW_MS)
    assert one.batch.partition_leader_epoch == 9


def test_an_empty_append_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="at least one record batch"):
        validate_and_assign_offsets(b"", next_offset=0, config=LogConfig(), now_ms=NOW_MS)


def test_a_batch_without_records_is_refused() -> None:
    empty = encode_batch([], base_offset=0, last_offset_delta=0)
    with pytest.raises(InvalidInputError, match="has no records"):
        validate_and_assign_offsets(empty, next_offset=0, config=LogConfig(), now_ms=NOW_MS)


def test_one_bad_batch_refuses_the_whole_append() -> None:
    """All or nothing: a corrupt second batch raises, naming its position in the append."""
    first = batch_of(b"a")
    second = bytearray(batch_of(b"b"))
    second[-1] ^= 0xFF
    with pytest.raises(CorruptDataError, match="invalid batch in append") as info:
        validate_and_assign_offsets(first + bytes(second), next_offset=0, config=LogConfig(), now_ms=NOW_MS)
    assert info.value.position == len(first)


def test_records_must_have_contiguous_offsets() -> None:
    records = [Record(0, NOW_MS, b"a", b"v"), Record(2, NOW_MS, b"b", b"v")]
    raw = encode_batch(records, last_offset_delta=1)  # the header's range is right, a record's delta is not
    with pytest.raises(InvalidInputError, match="record 1 has offset delta 2, expected 1"):
        validate_and_assign_offsets(raw, next_offset=0, config=LogConfig(), now_ms=NOW_MS)


def test_a_last_offset_delta_that_is_not_the_record_count_is_refused() -> None:
    """Kafka's "Inconsistent batch offset range": taken as it is, the next batch would skip offsets."""
    raw = batch_of(b"k", last_offset_delta=5) + batch_of(b"j")
    with pytest.raises(
        InvalidInputError, match="inconsistent offset range: last offset delta 5 for 1 records"
    ):
        validate_and_assign_offsets(raw, next_offset=0, config=LogConfig(), now_ms=NOW_MS)


def test_a_producer_id_without_a_sequence_is_refused() -> None:
    """Kafka's "Invalid sequence number": an idempotent producer numbers every batch."""
    raw = batch_of(b"k", producer_id=7, producer_epoch=0)
    with pytest.raises(InvalidInputError, match=r"invalid sequence number -1 .* producer id 7"):
        validate_and_assign_offsets(raw, next_offset=0, config=LogConfig(), now_ms=NOW_MS)
    accepted = validate_and_assign_offsets(
        batch_of(b"k", producer_id=7, producer_epoch=0, base_sequence=0),
        next_offset=0,
        config=LogConfig(),
        now_ms=NOW_MS,
    )
    assert [v.record_offsets for v in accepted] == [(0,)]


def test_a_batch_claiming_more_records_than_it_holds_is_refused() -> None:
    area = encode_records([Record(0, NOW_MS, b"a", b"v")], 0, NOW_MS)
    raw = encode_batch([Record(0, NOW_MS, b"a", b"v"), Record(1, NOW_MS, b"b", b"v")], records_area=area)
    with pytest.raises(CorruptDataError, match="record 1 of 2"):
        validate_and_assign_offsets(raw, next_offset=0, config=LogConfig(), now_ms=NOW_MS)


def test_max_message_bytes_bounds_each_batch_inclusively() -> None:
    raw = batch_of(b"a")
    config = LogConfig(max_message_bytes=len(raw))
    validate_and_assign_offsets(raw, next_offset=0, config=config, now_ms=NOW_MS)
    with pytest.raises(RecordTooLargeError, match=rf"max\.message\.bytes={len(raw) - 1}"):
        validate_and_assign_offsets(
            raw, next_offset=0, config=LogConfig(max_message_bytes=len(raw) - 1), now_ms=NOW_MS
        )


def test_an_append_larger_than_a_segment_is_refused() -> None:
    """Kafka's ``UnifiedLog.append``: a message set larger than ``segment.bytes`` could never fit a
    segment (``RecordBatchTooLargeException``); the bound is the whole append, every batch together."""
    one = batch_of(b"a")
    config = LogConfig(segment_bytes=2 * len(one))
    validate_and_assign_offsets(one + one, next_offset=0, config=config, now_ms=NOW_MS)
    with pytest.raises(RecordTooLargeError, match=rf"larger than segment\.bytes={2 * len(one)}"):
        validate_and_assign_offsets(one + one + one, next_offset=0, config=config, now_ms=NOW_MS)


def test_a_compacted_topic_needs_a_key_on_every_record() -> None:
    """Kafka's ``validateKey``: "Compacted topic cannot accept message without key"."""
    with pytest.raises(InvalidInputError, match=r"record 1 has no key.*cleanup\.policy=compact"):
        validate_and_assign_offsets(batch_of(b"a", None), next_offset=0, config=COMPACTED, now_ms=NOW_MS)
    validate_and_assign_offsets(batch_of(b"a", None), next_offset=0, config=LogConfig(), now_ms=NOW_MS)


def test_a_topic_whose_configs_are_unknown_is_not_held_to_compaction() -> None:
    config = LogConfig(cleanup_policy=frozenset({"compact"}), configs_unknown=True)
    validate_and_assign_offsets(batch_of(None), next_offset=0, config=config, now_ms=NOW_MS)


def test_a_transaction_marker_needs_no_data_key_on_a_compacted_topic() -> None:
    raw = encode_end_txn_marker_batch(
        offset=0, producer_id=3, producer_epoch=0, commit=True, timestamp=NOW_MS
    )
    (one,) = validate_and_assign_offsets(raw, next_offset=7, config=COMPACTED, now_ms=NOW_MS)
    assert one.batch.is_control and one.batch.base_offset == 7


@pytest.mark.parametrize(
    ("timestamp", "accepted"),
    [
        (NOW_MS - 1000, True),
        (NOW_MS - 1001, False),
        (NOW_MS + 500, True),
        (NOW_MS + 501, False),
        (NO_TIMESTAMP, True),  # no timestamp is not out of bounds
    ],
)
def test_create_time_bounds_are_kip_937s(timestamp: int, accepted: bool) -> None:
    """``now - ts > before.max.ms`` or ``ts - now > after.max.ms`` is refused; the bounds themselves
    are in."""
    config = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500)
    raw = batch_of(b"a", timestamp=timestamp)
    if accepted:
        validate_and_assign_offsets(raw, next_offset=0, config=config, now_ms=NOW_MS)
    else:
        with pytest.raises(InvalidInputError, match=r"message\.timestamp\.(before|after)\.max\.ms"):
            validate_and_assign_offsets(raw, next_offset=0, config=config, now_ms=NOW_MS)


def test_a_log_append_time_topic_ignores_the_bounds_and_stamps_its_clock() -> None:
    """LogAppendTime: the records' own timestamps do not matter; the batch gets the attribute bit and
    the clock as max timestamp, and so a new CRC."""
    config = LogConfig(
        message_timestamp_type=TimestampType.LOG_APPEND_TIME,
        message_timestamp_before_max_ms=0,
        message_timestamp_after_max_ms=0,
    )
    raw = batch_of(b"a", b"b", timestamp=5)
    (one,) = validate_and_assign_offsets(raw, next_offset=0, config=config, now_ms=NOW_MS)
    assert (one.log_append_time_ms, one.max_timestamp) == (NOW_MS, NOW_MS)
    stored = decode_batch(one.data)
    assert stored.timestamp_type is TimestampType.LOG_APPEND_TIME and stored.max_timestamp == NOW_MS
    assert stored.is_crc_valid() and stored.crc != decode_batch(raw).crc


def test_a_create_time_batch_gets_its_records_max_timestamp() -> None:
    """A producer's max timestamp that is not its records' is corrected (and the CRC with it), as the
    time index needs the true one."""
    records = [Record(0, NOW_MS - 5, b"a", b"v"), Record(1, NOW_MS - 2, b"b", b"v")]
    raw = encode_batch(records, max_timestamp=NOW_MS - 100)
    (one,) = validate_and_assign_offsets(raw, next_offset=0, config=LogConfig(), now_ms=NOW_MS)
    assert one.max_timestamp == NOW_MS - 2 and one.log_append_time_ms == NO_TIMESTAMP
    stored = decode_batch(one.data)
    assert stored.max_timestamp == NOW_MS - 2 and stored.is_crc_valid()


def test_a_producer_may_not_claim_log_append_time() -> None:
    raw = batch_of(b"a", timestamp_type=TimestampType.LOG_APPEND_TIME)
    config = LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    with pytest.raises(InvalidInputError, match="must not claim LogAppendTime"):
        validate_and_assign_offsets(raw, next_offset=0, config=config, now_ms=NOW_MS)


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
def test_a_compressed_batch_is_assigned_in_place(codec: CompressionType) -> None:
    """v2 inner offsets are deltas: a compressed batch gets its offsets (and LogAppendTime) without being
    decompressed and compressed again (Kafka's in-place assignment), its records area byte for byte."""
    records = [Record(i, NOW_MS - 10 + i, b"k%d" % i, b"v" * 30) for i in range(5)]
    raw = encode_batch(records, compression=codec)
    config = LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    (one,) = validate_and_assign_offsets(raw, next_offset=1000, config=config, now_ms=NOW_MS)
    assert one.data[61:] == raw[61:], "the compressed records area is untouched"
    stored = decode_batch(one.data)
    assert stored.is_crc_valid() and stored.compression is codec
    assert one.record_offsets == tuple(range(1000, 1005))
    assert [(r.offset, r.timestamp) for r in stored.records()] == [(1000 + i, NOW_MS) for i in range(5)]

"""Control records: marker batches are Kafka's 78 bytes and decode back; unknown types are UNKNOWN."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.base.errors import CorruptDataError
from service.storage.compression import CompressionType
from service.storage.control import (
    ControlRecordType,
    EndTransactionMarker,
    decode_control_type,
    decode_end_txn_marker,
    encode_control_key,
    encode_end_txn_marker_batch,
)
from service.storage.records import (
    NO_SEQUENCE,
    Record,
    TimestampType,
    decode_batch,
    encode_batch,
    iter_batches,
)

INT16_MAX = (1 << 15) - 1
INT32_MAX = (1 << 31) - 1
INT32_MIN = -(1 << 31)
INT64_MAX = (1 << 63) - 1


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_marker_batch_is_78_bytes_and_decodes(commit: bool) -> None:
    encoded = encode_end_txn_marker_batch(
        offset=42,
        producer_id=1234,
        producer_epoch=5,
        commit=commit,
        timestamp=1_700_000_000_000,
        coordinator_epoch=7,
        partition_leader_epoch=3,
    )
    assert len(encoded) == 78
    batch = decode_batch(encoded)
    assert batch.size_bytes == 78
    assert batch.is_control
    assert batch.is_transactional
    assert batch.is_crc_valid()
    assert not batch.has_delete_horizon
    assert batch.compression is CompressionType.NONE
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert batch.attributes == 0x30
    assert (batch.base_offset, batch.last_offset_delta, batch.records_count) == (42, 0, 1)
    assert (batch.producer_id, batch.producer_epoch) == (1234, 5)
    assert batch.base_sequence == NO_SEQUENCE
    assert batch.partition_leader_epoch == 3
    assert batch.base_timestamp == batch.max_timestamp == 1_700_000_000_000

    [record] = batch.records()
    assert record.offset == 42
    assert record.timestamp == 1_700_000_000_000
    expected_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    assert record.key == struct.pack(">hh", 0, int(expected_type))
    assert record.value == struct.pack(">hi", 0, 7)
    assert record.headers == ()
    assert decode_control_type(record.key) is expected_type
    assert decode_end_txn_marker(record) == EndTransactionMarker(expected_type, 7)


@settings(max_examples=100)
@given(
    offset=st.integers(0, 1 << 62),
    producer_id=st.integers(0, INT64_MAX),
    producer_epoch=st.integers(0, INT16_MAX),
    commit=st.booleans(),
    timestamp=st.integers(-1, 1 << 45),
    coordinator_epoch=st.integers(INT32_MIN, INT32_MAX),
    partition_leader_epoch=st.integers(INT32_MIN, INT32_MAX),
)
def test_marker_batch_round_trip(
    offset: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    timestamp: int,
    coordinator_epoch: int,
    partition_leader_epoch: int,
) -> None:
    encoded = encode_end_txn_marker_batch(
        offset=offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        commit=commit,
        timestamp=timestamp,
        coordinator_epoch=coordinator_epoch,
        partition_leader_epoch=partition_leader_epoch,
    )
    assert len(encoded) == 78
    batch = decode_batch(encoded)
    assert (batch.base_offset, batch.producer_id, batch.producer_epoch) == (
        offset,
        producer_id,
        producer_epoch,
    )
    assert batch.partition_leader_epoch == partition_leader_epoch
    [record] = batch.records()
    assert (record.offset, record.timestamp) == (offset, timestamp)
    marker = decode_end_txn_marker(record)
    assert marker.control_type is (ControlRecordType.COMMIT if commit else ControlRecordType.ABORT)
    assert marker.coordinator_epoch == coordinator_epoch


def test_markers_sit_between_data_batches() -> None:
    data = encode_batch(
        [Record(0, 10, b"k", b"v"), Record(1, 11, b"k", None)],
        producer_id=9,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    marker = encode_end_txn_marker_batch(
        offset=2, producer_id=9, producer_epoch=0, commit=False, timestamp=12
    )
    batches = list(iter_batches(data + marker))
    assert [(b.is_control, b.is_transactional) for b in batches] == [(False, True), (True, True)]
    assert decode_end_txn_marker(batches[1].records()[0]).control_type is ControlRecordType.ABORT


@pytest.mark.parametrize("control_type", list(ControlRecordType)[1:], ids=lambda t: t.name)
def test_control_key_round_trip(control_type: ControlRecordType) -> None:
    key = encode_control_key(control_type)
    assert len(key) == 4
    assert decode_control_type(key) is control_type


def test_control_type_ids_are_kafkas() -> None:
    assert {t.name: int(t) for t in ControlRecordType} == {
        "UNKNOWN": -1,
        "ABORT": 0,
        "COMMIT": 1,
        "LEADER_CHANGE": 2,
        "SNAPSHOT_HEADER": 3,
        "SNAPSHOT_FOOTER": 4,
        "KRAFT_VERSION": 5,
        "KRAFT_VOTERS": 6,
    }


@pytest.mark.parametrize("type_id", [7, 8, 99, INT16_MAX, -2, -(1 << 15)])
def test_unknown_control_type_is_unknown(type_id: int) -> None:
    key = struct.pack(">hh", 0, type_id)
    assert decode_control_type(key) is ControlRecordType.UNKNOWN

    # The same in a whole control batch, as a newer broker could write it.
    encoded = encode_batch(
        [Record(5, 100, key, b"\x00\x00")], producer_id=1, producer_epoch=0, is_control=True
    )
    [record] = decode_batch(encoded).records()
    assert decode_control_type(record.key) is ControlRecordType.UNKNOWN
    with pytest.raises(CorruptDataError, match="UNKNOWN is not a transaction marker"):
        decode_end_txn_marker(record)


def test_control_key_with_a_newer_version_and_extra_bytes_still_names_its_type() -> None:
    assert decode_control_type(struct.pack(">hh", 3, 1) + b"future") is ControlRecordType.COMMIT


@pytest.mark.parametrize("key", [None, b"", b"\x00", b"\x00\x00\x00"], ids=["null", "0", "1", "3"])
def test_short_control_key_is_corrupt(key: bytes | None) -> None:
    with pytest.raises(CorruptDataError, match="at least 4 bytes"):
        decode_control_type(key)


@pytest.mark.parametrize("control_type", [ControlRecordType.LEADER_CHANGE, ControlRecordType.SNAPSHOT_HEADER])
def test_other_control_types_are_not_transaction_markers(control_type: ControlRecordType) -> None:
    record = Record(0, 0, encode_control_key(control_type), b"\x00\x00\x00\x00\x00\x00")
    with pytest.raises(CorruptDataError, match=f"{control_type.name} is not a transaction marker"):
        decode_end_txn_marker(record)


@pytest.mark.parametrize("value", [None, b"", b"\x00\x00\x00\x00\x00"], ids=["null", "0", "5"])
def test_short_marker_value_is_corrupt(value: bytes | None) -> None:
    record = Record(0, 0, encode_control_key(ControlRecordType.COMMIT), value)
    with pytest.raises(CorruptDataError, match="at least 6 bytes"):
        decode_end_txn_marker(record)


@settings(max_examples=200)
@given(key=st.one_of(st.none(), st.binary(max_size=8)), value=st.one_of(st.none(), st.binary(max_size=10)))
def test_arbitrary_control_records_raise_only_corrupt_data_error(
    key: bytes | None, value: bytes | None
) -> None:
    try:
        control_type = decode_control_type(key)
    except CorruptDataError:
        return
    assert isinstance(control_type, ControlRecordType)
    try:
        marker = decode_end_txn_marker(Record(0, 0, key, value))
    except CorruptDataError:
        return
    assert marker.control_type in (ControlRecordType.COMMIT, ControlRecordType.ABORT)

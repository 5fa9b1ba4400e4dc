"""The __consumer_offsets and __transaction_state decoders, against bytes built by hand from Kafka's
schemas (OffsetCommitKey/Value.json, GroupMetadataKey/Value.json, TransactionLogKey/Value.json), never
with the module's own encoder, plus round trips and arbitrary bytes."""

from __future__ import annotations

import struct

import hypothesis.strategies as st
import pytest
from hypothesis import given

from service.storage.coordinator_records import (
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_VALUE,
    TRANSACTION_LOG_VALUE,
    decode_offsets_record,
    decode_transaction_log_record,
    encode_group_metadata_key,
    encode_offset_commit_key,
    encode_versioned,
)
from service.storage.message_schema import decode_uvarint, encode_uvarint


def s16(text: str | None) -> bytes:
    """A classic string: int16 length (-1 null) + UTF-8."""
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def b32(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def cstr(text: str | None) -> bytes:
    """A compact string: uvarint length+1 (0 null) + UTF-8; lengths here stay under 127."""
    if text is None:
        return b"\x00"
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


def cbytes(data: bytes) -> bytes:
    return bytes([len(data) + 1]) + data


def h(version: int) -> bytes:
    return struct.pack(">h", version)


OFFSET_KEY_V1 = h(1) + s16("g1") + s16("orders") + struct.pack(">i", 7)


# -- __consumer_offsets: offset commits --------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            h(0) + struct.pack(">q", 42) + s16("m") + struct.pack(">q", 1000),
            {"version": 0, "offset": 42, "metadata": "m", "commit_timestamp": 1000},
        ),
        (
            h(1) + struct.pack(">q", 42) + s16("") + struct.pack(">qq", 1000, 2000),
            {"version": 1, "offset": 42, "metadata": "", "commit_timestamp": 1000, "expire_timestamp": 2000},
        ),
        (
            h(2) + struct.pack(">q", 42) + s16("") + struct.pack(">q", 1000),
            {"version": 2, "offset": 42, "metadata": "", "commit_timestamp": 1000},
        ),
        (
            h(3) + struct.pack(">qi", 42, 5) + s16("x") + struct.pack(">q", 1000),
            {"version": 3, "offset": 42, "leader_epoch": 5, "metadata": "x", "commit_timestamp": 1000},
        ),
        (  # flexible: compact string, then an empty tagged-field section
            h(4) + struct.pack(">qi", 42, -1) + cstr("x") + struct.pack(">q", 1000) + b"\x00",
            {"version": 4, "offset": 42, "leader_epoch": -1, "metadata": "x", "commit_timestamp": 1000},
        ),
    ],
)
def test_offset_commit_values_of_every_version(value: bytes, expected: dict[str, object]) -> None:
    decoded = decode_offsets_record(OFFSET_KEY_V1, value)
    assert decoded["key"] == {
        "type": "offset_commit",
        "version": 1,
        "group": "g1",
        "topic": "orders",
        "partition": 7,
    }
    assert decoded["value"] == expected


def test_key_version_0_is_an_offset_commit_too() -> None:
    key = h(0) + s16("g") + s16("t") + struct.pack(">i", 0)
    assert decode_offsets_record(key, None) == {
        "key": {"type": "offset_commit", "version": 0, "group": "g", "topic": "t", "partition": 0},
        "value": None,
    }


def test_an_unknown_tag_is_kept_raw() -> None:
    value = h(4) + struct.pack(">qi", 1, 0) + cstr("") + struct.pack(">q", 9) + b"\x01\x05\x02\xab\xcd"
    decoded = decode_offsets_record(OFFSET_KEY_V1, value)["value"]
    assert isinstance(decoded, dict)
    assert decoded["unknown_tagged_fields"] == [{"tag": 5, "data": b"\xab\xcd"}]


# -- __consumer_offsets: group metadata ----------------------------------------------------------------

GROUP_KEY = h(2) + s16("g1")


def member_v0() -> bytes:
    return (
        s16("m-1") + s16("client") + s16("/10.0.0.1") + struct.pack(">i", 10000) + b32(b"\x00\x01") + b32(b"")
    )


def test_group_metadata_value_v0() -> None:
    value = h(0) + s16("consumer") + struct.pack(">i", 3) + s16("range") + s16("m-1")
    value += struct.pack(">i", 1) + member_v0()
    decoded = decode_offsets_record(GROUP_KEY, value)
    assert decoded["key"] == {"type": "group_metadata", "version": 2, "group": "g1"}
    assert decoded["value"] == {
        "version": 0,
        "protocol_type": "consumer",
        "generation": 3,
        "protocol": "range",
        "leader": "m-1",
        "members": [
            {
                "member_id": "m-1",
                "client_id": "client",
                "client_host": "/10.0.0.1",
                "session_timeout": 10000,
                "subscription": b"\x00\x01",
                "assignment": b"",
            }
        ],
    }


def test_group_metadata_value_v3_with_an_empty_group() -> None:
    value = h(3) + s16("consumer") + struct.pack(">i", 0) + s16(None) + s16(None)
    value += struct.pack(">q", 1234) + struct.pack(">i", 0)
    assert decode_offsets_record(GROUP_KEY, value)["value"] == {
        "version": 3,
        "protocol_type": "consumer",
        "generation": 0,
        "protocol": None,
        "leader": None,
        "current_state_timestamp": 1234,
        "members": [],
    }


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_group_metadata_members_of_later_versions(version: int) -> None:
    flexible = version >= 4
    string = cstr if flexible else s16
    member = string("m-1")
    if version >= 3:
        member += string("static-1")
    member += string("c") + string("h") + struct.pack(">ii", 30000, 10000)
    member += cbytes(b"s") + cbytes(b"a") + b"\x00" if flexible else b32(b"s") + b32(b"a")
    value = h(version) + string("consumer") + struct.pack(">i", 1) + string("range") + string("m-1")
    if version >= 2:
        value += struct.pack(">q", 99)
    value += (b"\x02" if flexible else struct.pack(">i", 1)) + member
    if flexible:
        value += b"\x00"
    decoded = decode_offsets_record(GROUP_KEY, value)["value"]
    assert isinstance(decoded, dict) and "note" not in decoded
    assert decoded["version"] == version
    members = decoded["members"]
    assert isinstance(members, list)
    assert members[0]["rebalance_timeout"] == 30000
    assert members[0]["subscription"] == b"s"
    assert members[0].get("group_instance_id") == ("static-1" if version >= 3 else None)


# -- unknown and broken ------------------------------------------------------------------------------


def test_unknown_value_version_is_raw_with_a_note() -> None:
    value = h(9) + b"\x01\x02"
    decoded = decode_offsets_record(OFFSET_KEY_V1, value)["value"]
    assert decoded == {
        "version": 9,
        "note": "unknown OffsetCommitValue version 9 (known: 0-4); shown raw",
        "raw": value,
    }


def test_unknown_key_version_is_raw_and_so_is_its_value() -> None:
    key, value = h(5) + b"abc", h(0) + b"xyz"
    decoded = decode_offsets_record(key, value)
    assert decoded["key"] == {
        "version": 5,
        "note": "key version 5 is not an offset commit (0, 1) or group metadata (2) key; shown raw",
        "raw": key,
    }
    assert decoded["value"] == {"version": 0, "note": "the key's type is unknown", "raw": value}


def test_truncated_value_is_raw_with_the_position() -> None:
    value = h(3) + struct.pack(">q", 42)
    decoded = decode_offsets_record(OFFSET_KEY_V1, value)["value"]
    assert isinstance(decoded, dict) and decoded["raw"] == value
    assert decoded["note"] == (
        "OffsetCommitValue version 3 does not decode at byte 10: leader_epoch needs 4 bytes, 0 are left"
    )


def test_a_one_byte_key_is_raw() -> None:
    assert decode_offsets_record(b"\x00", None) == {
        "key": {"version": None, "note": "a key needs a 2-byte version", "raw": b"\x00"},
        "value": None,
    }


@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=64)))
def test_arbitrary_bytes_never_raise(key: bytes, value: bytes | None) -> None:
    decode_offsets_record(key, value)
    decode_transaction_log_record(key, value)


# -- __transaction_state ------------------------------------------------------------------------------


def test_transaction_log_v0() -> None:
    key = h(0) + s16("txn-1")
    value = h(0) + struct.pack(">qhib", 5000, 3, 60000, 1)
    value += struct.pack(">i", 1) + s16("orders") + struct.pack(">iii", 2, 0, 4)
    value += struct.pack(">qq", 1700000001000, 1700000000000)
    assert decode_transaction_log_record(key, value) == {
        "key": {"version": 0, "transactional_id": "txn-1"},
        "value": {
            "version": 0,
            "producer_id": 5000,
            "producer_epoch": 3,
            "transaction_timeout_ms": 60000,
            "transaction_status": 1,
            "transaction_partitions": [{"topic": "orders", "partition_ids": [0, 4]}],
            "transaction_last_update_timestamp_ms": 1700000001000,
            "transaction_start_timestamp_ms": 1700000000000,
        },
    }


def test_transaction_log_v0_with_no_partitions_is_null() -> None:
    value = h(0) + struct.pack(">qhib", 1, 0, 1, 0) + struct.pack(">i", -1) + struct.pack(">qq", 0, -1)
    decoded = decode_transaction_log_record(h(0) + s16("t"), value)["value"]
    assert isinstance(decoded, dict) and decoded["transaction_partitions"] is None


def test_transaction_log_v1_flexible_with_tagged_fields() -> None:
    value = h(1) + struct.pack(">qhib", 5000, 3, 60000, 4)
    value += b"\x02" + cstr("orders") + b"\x02" + struct.pack(">i", 0) + b"\x00"  # one partition, no tags
    value += struct.pack(">qq", 20, 10)
    # tagged: 0 previous producer id = 4999, 2 client transaction version = 2
    value += b"\x02" + b"\x00\x08" + struct.pack(">q", 4999) + b"\x02\x02" + struct.pack(">h", 2)
    decoded = decode_transaction_log_record(h(0) + s16("txn-1"), value)["value"]
    assert decoded == {
        "version": 1,
        "producer_id": 5000,
        "previous_producer_id": 4999,
        "next_producer_id": -1,
        "producer_epoch": 3,
        "transaction_timeout_ms": 60000,
        "transaction_status": 4,
        "transaction_partitions": [{"topic": "orders", "partition_ids": [0]}],
        "transaction_last_update_timestamp_ms": 20,
        "transaction_start_timestamp_ms": 10,
        "client_transaction_version": 2,
    }


def test_transaction_log_tombstone_and_unknown_version() -> None:
    key = h(0) + s16("t")
    assert decode_transaction_log_record(key, None)["value"] is None
    unknown = decode_transaction_log_record(h(1) + s16("t"), None)["key"]
    assert isinstance(unknown, dict) and unknown["raw"] == h(1) + s16("t")


# -- the encoders agree with the hand-built bytes, and round-trip ---------------------------------


def test_encoded_keys_are_kafkas_bytes() -> None:
    assert encode_offset_commit_key("g1", "orders", 7) == OFFSET_KEY_V1
    assert encode_group_metadata_key("g1") == GROUP_KEY


@pytest.mark.parametrize("version", range(5))
def test_offset_commit_value_round_trip(version: int) -> None:
    values = {"offset": 12, "leader_epoch": 3, "metadata": "m", "commit_timestamp": 5, "expire_timestamp": 8}
    raw = encode_versioned(OFFSET_COMMIT_VALUE, version, values)
    decoded = decode_offsets_record(OFFSET_KEY_V1, raw)["value"]
    assert isinstance(decoded, dict) and decoded["version"] == version and "note" not in decoded
    assert all(decoded[name] == values[name] for name in decoded if name != "version")


@given(
    version=st.integers(0, 4),
    generation=st.integers(-(2**31), 2**31 - 1),
    protocol=st.one_of(st.none(), st.text(max_size=20)),
    subscription=st.binary(max_size=300),
)
def test_group_metadata_round_trip(
    version: int, generation: int, protocol: str | None, subscription: bytes
) -> None:
    member = {
        "member_id": "m",
        "group_instance_id": "i" if version >= 3 else None,
        "client_id": "c",
        "client_host": "h",
        "rebalance_timeout": 7 if version >= 1 else -1,
        "session_timeout": 6,
        "subscription": subscription,
        "assignment": b"",
    }
    values = {
        "protocol_type": "consumer",
        "generation": generation,
        "protocol": protocol,
        "leader": None,
        "current_state_timestamp": 44 if version >= 2 else -1,
        "members": [member],
    }
    decoded = decode_offsets_record(GROUP_KEY, encode_versioned(GROUP_METADATA_VALUE, version, values))[
        "value"
    ]
    assert isinstance(decoded, dict) and "note" not in decoded
    assert decoded["generation"] == generation and decoded["protocol"] == protocol
    members = decoded["members"]
    assert isinstance(members, list) and members[0]["subscription"] == subscription


@pytest.mark.parametrize("version", [0, 1])
def test_transaction_log_value_round_trip(version: int) -> None:
    values: dict[str, object] = {
        "producer_id": 1,
        "producer_epoch": 2,
        "transaction_timeout_ms": 3,
        "transaction_status": 2,
        "transaction_partitions": [{"topic": "a", "partition_ids": [1, 2]}],
        "transaction_last_update_timestamp_ms": 4,
        "transaction_start_timestamp_ms": 5,
    }
    if version == 1:
        values |= {"previous_producer_id": 7, "next_producer_id": -1, "client_transaction_version": 2}
    raw = encode_versioned(TRANSACTION_LOG_VALUE, version, values)
    assert decode_transaction_log_record(h(0) + s16("t"), raw)["value"] == {"version": version, **values}


@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trip(value: int) -> None:
    assert decode_uvarint(encode_uvarint(value), 0) == (value, len(encode_uvarint(value)))


def test_a_bad_tagged_field_is_raw_with_its_position_in_the_value() -> None:
    # tag 0 (previous_producer_id, an int64) given 2 bytes only
    value = (
        h(1) + struct.pack(">qhib", 1, 0, 1, 0) + b"\x00" + struct.pack(">qq", 0, 0) + b"\x01\x00\x02\xaa\xbb"
    )
    decoded = decode_transaction_log_record(h(0) + s16("t"), value)["value"]
    assert isinstance(decoded, dict) and decoded["raw"] == value
    assert decoded["note"] == (
        "TransactionLogValue version 1 does not decode at byte 37: "
        "previous_producer_id needs 8 bytes, 2 are left"
    )


def test_a_null_where_the_schema_forbids_it_is_raw() -> None:
    value = h(3) + struct.pack(">qi", 1, 0) + s16(None) + struct.pack(">q", 0)  # metadata is not nullable
    decoded = decode_offsets_record(OFFSET_KEY_V1, value)["value"]
    assert isinstance(decoded, dict)
    assert decoded["note"] == (
        "OffsetCommitValue version 3 does not decode at byte 16: "
        "metadata is null, which version 3 does not allow"
    )


def test_a_keyless_record_shows_its_value_raw() -> None:
    assert decode_offsets_record(None, None) == {"key": None, "value": None}
    assert decode_transaction_log_record(None, h(0) + b"x") == {
        "key": None,
        "value": {"version": 0, "note": "a __transaction_state record needs a key", "raw": h(0) + b"x"},
    }

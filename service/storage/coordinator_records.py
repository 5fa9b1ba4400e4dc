"""The records Kafka's coordinators write to ``__consumer_offsets`` and ``__transaction_state``.

Each record's key and value start with an int16 *version*; the rest is a message of Kafka's schema at
that version (wire rules in ``message_schema``). In ``__consumer_offsets`` the key's version says what
the record is::

    key version 0, 1   OffsetCommitKey    group, topic, partition          value: OffsetCommitValue 0-4
    key version 2      GroupMetadataKey   group                            value: GroupMetadataValue 0-4

A null value is a tombstone (offsets deleted, group expired). Key versions 3 and up are the records of
KIP-848/932/1071 groups (Kafka 4.x); they are shown raw. In ``__transaction_state`` the key is
TransactionLogKey 0 (the transactional id) and the value TransactionLogValue 0-1. The schemas below are
Kafka's ``OffsetCommitKey.json`` … ``TransactionLogValue.json`` with the field names in snake_case.

Decoding never fails: a version Kafka does not define, or bytes that do not fit the schema, give
``{"version": v, "note": why, "raw": bytes}`` instead of the fields, so a dump shows everything.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from service.base.errors import CorruptDataError
from service.storage.message_schema import Field, Schema, decode_message, encode_message

__all__ = [
    "GROUP_METADATA_KEY",
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE",
    "OFFSET_COMMIT_KEY",
    "OFFSET_COMMIT_KEY_VERSION",
    "OFFSET_COMMIT_VALUE",
    "TRANSACTION_LOG_KEY",
    "TRANSACTION_LOG_VALUE",
    "Decoded",
    "decode_offsets_record",
    "decode_transaction_log_record",
    "encode_group_metadata_key",
    "encode_offset_commit_key",
    "encode_versioned",
]

Decoded = dict[str, object]

OFFSET_COMMIT_KEY = Schema(
    "OffsetCommitKey",
    0,
    0,
    None,
    (Field("group", "string"), Field("topic", "string"), Field("partition", "int32")),
)
OFFSET_COMMIT_VALUE = Schema(
    "OffsetCommitValue",
    0,
    4,
    4,
    (
        Field("offset", "int64"),
        Field("leader_epoch", "int32", first_version=3, default=-1),
        Field("metadata", "string"),
        Field("commit_timestamp", "int64"),
        Field("expire_timestamp", "int64", first_version=1, last_version=1, default=-1),
    ),
)
GROUP_METADATA_KEY = Schema("GroupMetadataKey", 0, 0, None, (Field("group", "string"),))
_MEMBER_METADATA = (
    Field("member_id", "string"),
    Field("group_instance_id", "string", first_version=3, nullable_from=3),
    Field("client_id", "string"),
    Field("client_host", "string"),
    Field("rebalance_timeout", "int32", first_version=1, default=-1),
    Field("session_timeout", "int32"),
    Field("subscription", "bytes"),
    Field("assignment", "bytes"),
)
GROUP_METADATA_VALUE = Schema(
    "GroupMetadataValue",
    0,
    4,
    4,
    (
        Field("protocol_type", "string"),
        Field("generation", "int32"),
        Field("protocol", "string", nullable_from=0),
        Field("leader", "string", nullable_from=0),
        Field("current_state_timestamp", "int64", first_version=2, default=-1),
        Field("members", "struct", is_array=True, fields=_MEMBER_METADATA),
    ),
)
TRANSACTION_LOG_KEY = Schema("TransactionLogKey", 0, 0, None, (Field("transactional_id", "string"),))
_PARTITIONS_SCHEMA = (Field("topic", "string"), Field("partition_ids", "int32", is_array=True))
TRANSACTION_LOG_VALUE = Schema(
    "TransactionLogValue",
    0,
    1,
    1,
    (
        Field("producer_id", "int64"),
        Field("previous_producer_id", "int64", first_version=1, tag=0, default=-1),
        Field("next_producer_id", "int64", first_version=1, tag=1, default=-1),
        Field("producer_epoch", "int16"),
        Field("transaction_timeout_ms", "int32"),
        Field("transaction_status", "int8"),
        Field("transaction_partitions", "struct", is_array=True, nullable_from=0, fields=_PARTITIONS_SCHEMA),
        Field("transaction_last_update_timestamp_ms", "int64"),
        Field("transaction_start_timestamp_ms", "int64"),
        Field("client_transaction_version", "int16", first_version=1, tag=2, default=0),
    ),
)

OFFSET_COMMIT_KEY_VERSION = 1  # what Kafka 2.x-4.x write (0 is the same layout, from 0.8.2)
GROUP_METADATA_KEY_VERSION = 2
_CONSUMER_OFFSETS_KEYS: dict[int, tuple[str, Schema, Schema]] = {
    0: ("offset_commit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    1: ("offset_commit", OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    2: ("group_metadata", GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
}
_VERSION = struct.Struct(">h")


def encode_versioned(
    schema: Schema, version: int, values: Mapping[str, object], *, prefix: int | None = None
) -> bytes:
    """A record key or value: the int16 ``prefix`` (default ``version``), then the message at ``version``."""
    return _VERSION.pack(version if prefix is None else prefix) + encode_message(schema, version, values)


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """The key of an offset commit, as Kafka writes it (key version 1)."""
    values = {"group": group, "topic": topic, "partition": partition}
    return encode_versioned(OFFSET_COMMIT_KEY, 0, values, prefix=OFFSET_COMMIT_KEY_VERSION)


def encode_group_metadata_key(group: str) -> bytes:
    """The key of a group's metadata (key version 2)."""
    return encode_versioned(GROUP_METADATA_KEY, 0, {"group": group}, prefix=GROUP_METADATA_KEY_VERSION)


# -- decoding ------------------------------------------------------------------------------------------


def decode_offsets_record(key: bytes | None, value: bytes | None) -> Decoded:
    """A ``__consumer_offsets`` record as ``{"key": {...}, "value": {...} | None}``."""
    if key is None:
        return {"key": None, "value": _raw_value(value, "a __consumer_offsets record needs a key")}
    key_version = _version_of(key)
    known = _CONSUMER_OFFSETS_KEYS.get(key_version) if key_version is not None else None
    if known is None:
        note = (
            f"key version {key_version} is not an offset commit (0, 1) or group metadata (2) key; shown raw"
            if key_version is not None
            else "a key needs a 2-byte version"
        )
        return {"key": _raw(key_version, key, note), "value": _raw_value(value, "the key's type is unknown")}
    record_type, key_schema, value_schema = known
    decoded_key = _decode_part(key, key_schema, key_version, message_version=0)  # one layout, two prefixes
    if "note" not in decoded_key:
        decoded_key = {"type": record_type, **decoded_key}
    return {"key": decoded_key, "value": _decode_value(value, value_schema)}


def decode_transaction_log_record(key: bytes | None, value: bytes | None) -> Decoded:
    """A ``__transaction_state`` record as ``{"key": {...}, "value": {...} | None}``."""
    if key is None:
        return {"key": None, "value": _raw_value(value, "a __transaction_state record needs a key")}
    return {
        "key": _decode_part(key, TRANSACTION_LOG_KEY, _version_of(key)),
        "value": _decode_value(value, TRANSACTION_LOG_VALUE),
    }


def _decode_value(value: bytes | None, schema: Schema) -> Decoded | None:
    if value is None:
        return None  # a tombstone
    return _decode_part(value, schema, _version_of(value))


def _decode_part(
    data: bytes, schema: Schema, version: int | None, *, message_version: int | None = None
) -> Decoded:
    """``data`` (its ``version`` prefix included) decoded as ``schema`` at ``message_version`` (default:
    the prefix), or raw with a note saying why it cannot be."""
    if version is None:
        return _raw(None, data, f"{schema.name} needs a 2-byte version, got {len(data)} bytes")
    if message_version is None:
        message_version = version
    if not schema.has_version(message_version):
        return _raw(
            version,
            data,
            f"unknown {schema.name} version {version} (known: {schema.first_version}-"
            f"{schema.last_version}); shown raw",
        )
    try:
        fields, end = decode_message(schema, message_version, data, _VERSION.size)
    except CorruptDataError as exc:
        where = "" if exc.position is None else f" at byte {exc.position}"
        return _raw(version, data, f"{schema.name} version {version} does not decode{where}: {exc.reason}")
    decoded: Decoded = {"version": version, **fields}
    if end != len(data):
        decoded["note"] = f"{len(data) - end} bytes after the {schema.name} fields were not decoded"
    return decoded


def _raw_value(value: bytes | None, note: str) -> Decoded | None:
    return None if value is None else _raw(_version_of(value), value, note)


def _raw(version: int | None, data: bytes | None, note: str) -> Decoded:
    return {"version": version, "note": note, "raw": data}


def _version_of(data: bytes) -> int | None:
    if len(data) < _VERSION.size:
        return None
    version: int = _VERSION.unpack_from(data)[0]
    return version

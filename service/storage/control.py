"""Control records: transaction markers (COMMIT/ABORT) and the KRaft control types.

A control batch (attribute bit 5) holds exactly one record whose key is ``int16 version (0), int16 type``.
A transaction marker's value is ``int16 version (0), int32 coordinatorEpoch``, so a marker batch is
61 + 17 = 78 bytes. Control records never enter the cleaner's key map.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from service.base.errors import CorruptDataError
from service.storage.records import NO_SEQUENCE, Record, encode_batch

__all__ = [
    "ControlRecordType",
    "EndTransactionMarker",
    "decode_control_type",
    "decode_end_txn_marker",
    "encode_control_key",
    "encode_end_txn_marker_batch",
]

_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


def encode_control_key(control_type: ControlRecordType) -> bytes:
    return _CONTROL_KEY.pack(0, int(control_type))


def decode_control_type(key: bytes | None) -> ControlRecordType:
    """The type named by a control record's key; an unknown type is ``UNKNOWN``, as Kafka reads it."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptDataError(f"control record key must be at least 4 bytes, got {key!r}")
    _version, type_id = _CONTROL_KEY.unpack_from(key)
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return ControlRecordType.UNKNOWN


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    control_type: ControlRecordType  # COMMIT or ABORT
    coordinator_epoch: int


def decode_end_txn_marker(record: Record) -> EndTransactionMarker:
    control_type = decode_control_type(record.key)
    if control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        raise CorruptDataError(f"control record of type {control_type.name} is not a transaction marker")
    if record.value is None or len(record.value) < _END_TXN_VALUE.size:
        raise CorruptDataError("transaction marker value must be at least 6 bytes")
    _version, coordinator_epoch = _END_TXN_VALUE.unpack_from(record.value)
    return EndTransactionMarker(control_type, coordinator_epoch)


def encode_end_txn_marker_batch(
    *,
    offset: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    timestamp: int,
    coordinator_epoch: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A COMMIT or ABORT marker batch: control + transactional, one record, no sequence."""
    control_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    record = Record(
        offset,
        timestamp,
        encode_control_key(control_type),
        _END_TXN_VALUE.pack(0, coordinator_epoch),
    )
    return encode_batch(
        [record],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )

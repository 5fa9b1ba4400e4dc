"""Encoding metadata log batches and snapshots, as a KRaft controller writes them.

logcleaner never writes a broker's metadata log; this is for ``gen`` (a small metadata log for a synthetic
workload, so the feature can be seen without a broker) and for tests. The bytes are Kafka's: record
batches v2 whose record values are metadata record frames (``records.py``), and snapshots framed by a
SnapshotHeader and a SnapshotFooter control batch (``log_reader.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from service.metadata.records import encode_metadata_record
from service.metadata.schemas import CONTROL_SCHEMAS
from service.storage.control import ControlRecordType, encode_control_key
from service.storage.log_files import file_name
from service.storage.message_schema import encode_message
from service.storage.records import Record, encode_batch

__all__ = [
    "MetadataRecordSpec",
    "encode_control_batch",
    "encode_metadata_batch",
    "encode_snapshot",
    "snapshot_file_name",
]


@dataclass(frozen=True, slots=True)
class MetadataRecordSpec:
    """One record to write: its api key, version and fields (snake_case, as ``records.py`` names them)."""

    api_key: int
    version: int
    fields: Mapping[str, object]


def encode_metadata_batch(
    specs: Sequence[MetadataRecordSpec], *, base_offset: int, timestamp: int, leader_epoch: int = 1
) -> bytes:
    """One batch of metadata records at ``base_offset`` onwards (null keys, as Kafka writes them)."""
    records = [
        Record(base_offset + i, timestamp, None, encode_metadata_record(s.api_key, s.version, s.fields))
        for i, s in enumerate(specs)
    ]
    return encode_batch(records, partition_leader_epoch=leader_epoch)


def encode_control_batch(
    control_type: ControlRecordType,
    fields: Mapping[str, object],
    *,
    offset: int,
    timestamp: int,
    leader_epoch: int = 1,
) -> bytes:
    """A control batch of one record whose value is ``fields`` in the control type's schema (version 0)."""
    value = encode_message(CONTROL_SCHEMAS[control_type], 0, fields)
    record = Record(offset, timestamp, encode_control_key(control_type), value)
    return encode_batch([record], is_control=True, partition_leader_epoch=leader_epoch)


def encode_snapshot(
    specs: Sequence[MetadataRecordSpec], *, timestamp: int, epoch: int = 1, batch_records: int = 1000
) -> bytes:
    """A whole ``.checkpoint`` file: header, the records in batches of ``batch_records``, footer.

    A snapshot's batches count their offsets from 0, as Kafka's ``RecordsSnapshotWriter`` does.
    """
    header = ControlRecordType.SNAPSHOT_HEADER
    out = bytearray(
        encode_control_batch(
            header, {"version": 0, "last_contained_log_timestamp": timestamp}, offset=0, timestamp=timestamp
        )
    )
    offset = 1
    for start in range(0, len(specs), batch_records):
        chunk = specs[start : start + batch_records]
        out += encode_metadata_batch(chunk, base_offset=offset, timestamp=timestamp, leader_epoch=epoch)
        offset += len(chunk)
    footer = ControlRecordType.SNAPSHOT_FOOTER
    out += encode_control_batch(footer, {"version": 0}, offset=offset, timestamp=timestamp)
    return bytes(out)


def snapshot_file_name(end_offset: int, epoch: int) -> str:
    """Kafka's ``Snapshots.filenameFromSnapshotId`` plus suffix: ``<20 digits>-<10 digits>.checkpoint``."""
    return file_name(end_offset, f"-{epoch:010d}.checkpoint")

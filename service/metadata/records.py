"""KRaft metadata records: the values of ``__cluster_metadata`` batches (Kafka ``MetadataRecordSerde``).

Each record value is a frame (``AbstractApiMessageSerde``)::

    uvarint frameVersion (1)   uvarint apiKey   uvarint version   message (generated-message encoding)

followed by nothing: bytes left over after the message are corrupt. Every metadata record is flexible
from version 0 (compact strings and arrays, tagged fields). ``schemas.py`` holds every kind Kafka 4.4
defines, each version, so every record a broker writes decodes with all its fields; an api key not there
(one a later Kafka adds) is named ``UnknownRecord(api key N)`` and skipped. Reading the log for its image,
only the kinds the image applies (:data:`IMAGE_RECORD_KEYS`) must decode: a kind the image does not use at a
version a later Kafka added is named and skipped, so a newer broker's log still reads.

Control batches (SnapshotHeader/Footer, LeaderChange, KRaftVersion, Voters) hold control records whose
value is a message starting with its int16 ``version`` field; :data:`CONTROL_SCHEMAS` decodes those a
dump shows.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from service.base.errors import CorruptDataError
from service.metadata.schemas import (
    CONFIG_RECORD_KEY,
    CONTROL_SCHEMAS,
    METADATA_SCHEMAS,
    PARTITION_CHANGE_RECORD_KEY,
    PARTITION_RECORD_KEY,
    REMOVE_TOPIC_RECORD_KEY,
    TOPIC_RECORD_KEY,
)
from service.storage.control import ControlRecordType
from service.storage.message_schema import decode_message, decode_uvarint, encode_message, encode_uvarint

__all__ = [
    "ABORT_TRANSACTION_RECORD_KEY",
    "BEGIN_TRANSACTION_RECORD_KEY",
    "END_TRANSACTION_RECORD_KEY",
    "CONFIG_RECORD_KEY",
    "CONTROL_RECORD_NAMES",
    "CONTROL_SCHEMAS",
    "FRAME_VERSION",
    "IMAGE_RECORD_KEYS",
    "METADATA_RECORD_NAMES",
    "METADATA_SCHEMAS",
    "PARTITION_CHANGE_RECORD_KEY",
    "PARTITION_RECORD_KEY",
    "REMOVE_TOPIC_RECORD_KEY",
    "TOPIC_RECORD_KEY",
    "MetadataRecord",
    "decode_cluster_metadata_record",
    "decode_control_value",
    "decode_metadata_record",
    "encode_metadata_record",
]

FRAME_VERSION = 1
BEGIN_TRANSACTION_RECORD_KEY, END_TRANSACTION_RECORD_KEY, ABORT_TRANSACTION_RECORD_KEY = 23, 24, 25
# The kinds ``image.MetadataImageBuilder`` applies: a record of these that does not decode stops the read.
IMAGE_RECORD_KEYS = frozenset(
    {
        TOPIC_RECORD_KEY,
        PARTITION_RECORD_KEY,
        CONFIG_RECORD_KEY,
        PARTITION_CHANGE_RECORD_KEY,
        REMOVE_TOPIC_RECORD_KEY,
        BEGIN_TRANSACTION_RECORD_KEY,
        END_TRANSACTION_RECORD_KEY,
        ABORT_TRANSACTION_RECORD_KEY,
    }
)

# Every metadata api key Kafka 4.4 defines, by the record's name.
METADATA_RECORD_NAMES: Mapping[int, str] = {key: schema.name for key, schema in METADATA_SCHEMAS.items()}

CONTROL_RECORD_NAMES: Mapping[ControlRecordType, str] = {
    ControlRecordType.LEADER_CHANGE: "LeaderChangeMessage",
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeaderRecord",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooterRecord",
    ControlRecordType.KRAFT_VERSION: "KRaftVersionRecord",
    ControlRecordType.KRAFT_VOTERS: "VotersRecord",
    ControlRecordType.COMMIT: "EndTxnMarker",
    ControlRecordType.ABORT: "EndTxnMarker",
}


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """One decoded record: its api key and version, its kind (the record's name) and its fields (``None``:
    an api key this reader does not know)."""

    api_key: int
    version: int
    kind: str
    fields: dict[str, object] | None


def decode_metadata_record(value: bytes | None, *, only: Collection[int] | None = None) -> MetadataRecord:
    """Decode one record value; ``CorruptDataError`` (position within the value) if it is not a frame of
    a known version, or its message does not fit the schema of its kind. ``only``: the api keys that must
    decode; a record of another kind that does not (a version this reader does not know) has no fields."""
    if value is None:
        raise CorruptDataError("a metadata record has a null value", position=0)
    frame_version, pos = decode_uvarint(value, 0)
    if frame_version != FRAME_VERSION:
        raise CorruptDataError(
            f"metadata record frame version {frame_version}; only {FRAME_VERSION} is defined", position=0
        )
    api_key, pos = decode_uvarint(value, pos)
    version, pos = decode_uvarint(value, pos)
    kind = METADATA_RECORD_NAMES.get(api_key, f"UnknownRecord(api key {api_key})")
    schema = METADATA_SCHEMAS.get(api_key)
    if schema is None or (only is not None and api_key not in only and not schema.has_version(version)):
        return MetadataRecord(api_key, version, kind, None)
    if not schema.has_version(version):
        raise CorruptDataError(
            f"{kind} version {version}; this reader knows versions "
            f"{schema.first_version}-{schema.last_version}",
            position=0,
        )
    fields, end = decode_message(schema, version, value, pos)
    if end != len(value):
        raise CorruptDataError(f"{len(value) - end} byte(s) of garbage after a {kind}", position=end)
    return MetadataRecord(api_key, version, kind, fields)


def encode_metadata_record(api_key: int, version: int, fields: Mapping[str, object]) -> bytes:
    """The frame of one record (tests and ``gen``); the api key must have a schema here."""
    schema = METADATA_SCHEMAS[api_key]
    return (
        encode_uvarint(FRAME_VERSION)
        + encode_uvarint(api_key)
        + encode_uvarint(version)
        + encode_message(schema, version, fields)
    )


def decode_control_value(control_type: ControlRecordType, value: bytes | None) -> dict[str, object] | None:
    """The fields of a control record's value where a schema here knows its kind, else ``None``."""
    schema = CONTROL_SCHEMAS.get(control_type)
    if schema is None or value is None:
        return None
    fields, _end = decode_message(schema, 0, value)
    return fields


def decode_cluster_metadata_record(key: bytes | None, value: bytes | None) -> dict[str, object]:
    """``dump --cluster-metadata-decoder``: ``{"key": null, "value": {"kind", "api_key", "version", …}}``,
    the record's fields in snake_case beside them, as the other decoders give a value's fields beside its
    ``version`` (no metadata record has a field of those three names); an unknown api key has none.

    Never fails: bytes that are not a metadata record give ``{"note": why, "raw": bytes}`` as the value,
    so a dump shows everything.
    """
    try:
        record = decode_metadata_record(value)
    except CorruptDataError as exc:
        return {"key": key, "value": {"note": exc.reason, "raw": value}}
    decoded: dict[str, object] = {"kind": record.kind, "api_key": record.api_key, "version": record.version}
    decoded.update(record.fields or {})
    return {"key": key, "value": decoded}

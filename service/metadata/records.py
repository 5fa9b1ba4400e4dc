"""KRaft metadata records: the values of ``__cluster_metadata`` batches (Kafka ``MetadataRecordSerde``).

Each record value is a frame (``AbstractApiMessageSerde``)::

    uvarint frameVersion (1)   uvarint apiKey   uvarint version   message (generated-message encoding)

followed by nothing: bytes left over after the message are corrupt. Every metadata record is flexible
from version 0 (compact strings and arrays, tagged fields). The schemas below are Kafka's
``metadata/src/main/resources/common/metadata/*.json`` with the field names in snake_case, for the kinds
logcleaner reads (topics, partitions, configs) and a few more that a dump shows; every other api key is
named and skipped.

Control batches (SnapshotHeader/Footer, LeaderChange, KRaftVersion, Voters) hold control records whose
value is a message starting with its int16 ``version`` field; :data:`CONTROL_SCHEMAS` decodes those a
dump shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from service.errors import CorruptDataError
from service.storage.control import ControlRecordType
from service.storage.message_schema import (
    Field,
    Schema,
    decode_message,
    decode_uvarint,
    encode_message,
    encode_uvarint,
)

__all__ = [
    "CONFIG_RECORD",
    "CONFIG_RECORD_KEY",
    "CONTROL_RECORD_NAMES",
    "CONTROL_SCHEMAS",
    "FRAME_VERSION",
    "METADATA_RECORD_NAMES",
    "METADATA_SCHEMAS",
    "PARTITION_CHANGE_RECORD",
    "PARTITION_CHANGE_RECORD_KEY",
    "PARTITION_RECORD",
    "PARTITION_RECORD_KEY",
    "REMOVE_TOPIC_RECORD",
    "REMOVE_TOPIC_RECORD_KEY",
    "TOPIC_RECORD",
    "TOPIC_RECORD_KEY",
    "MetadataRecord",
    "decode_cluster_metadata_record",
    "decode_control_value",
    "decode_metadata_record",
    "encode_metadata_record",
]

FRAME_VERSION = 1

TOPIC_RECORD_KEY = 2
PARTITION_RECORD_KEY = 3
CONFIG_RECORD_KEY = 4
PARTITION_CHANGE_RECORD_KEY = 5
REMOVE_TOPIC_RECORD_KEY = 9

# Every metadata api key Kafka 3.x/4.x defines, by the record's name.
METADATA_RECORD_NAMES: Mapping[int, str] = {
    0: "RegisterBrokerRecord",
    1: "UnregisterBrokerRecord",
    2: "TopicRecord",
    3: "PartitionRecord",
    4: "ConfigRecord",
    5: "PartitionChangeRecord",
    7: "FenceBrokerRecord",
    8: "UnfenceBrokerRecord",
    9: "RemoveTopicRecord",
    10: "DelegationTokenRecord",
    11: "UserScramCredentialRecord",
    12: "FeatureLevelRecord",
    14: "ClientQuotaRecord",
    15: "ProducerIdsRecord",
    17: "BrokerRegistrationChangeRecord",
    18: "AccessControlEntryRecord",
    19: "RemoveAccessControlEntryRecord",
    20: "NoOpRecord",
    21: "ZkMigrationStateRecord",
    22: "RemoveUserScramCredentialRecord",
    23: "BeginTransactionRecord",
    24: "EndTransactionRecord",
    25: "AbortTransactionRecord",
    26: "RemoveDelegationTokenRecord",
    27: "RegisterControllerRecord",
}

_INT32S = "int32"

TOPIC_RECORD = Schema("TopicRecord", 0, 0, 0, (Field("name", "string"), Field("topic_id", "uuid")))
PARTITION_RECORD = Schema(
    "PartitionRecord",
    0,
    2,
    0,
    (
        Field("partition_id", _INT32S, default=-1),
        Field("topic_id", "uuid"),
        Field("replicas", _INT32S, is_array=True),
        Field("isr", _INT32S, is_array=True),
        Field("removing_replicas", _INT32S, is_array=True),
        Field("adding_replicas", _INT32S, is_array=True),
        Field("leader", _INT32S, default=-1),
        Field("leader_recovery_state", "int8", tag=0, default=0),
        Field("leader_epoch", _INT32S, default=-1),
        Field("partition_epoch", _INT32S, default=-1),
        Field("directories", "uuid", first_version=1, is_array=True),
        Field("eligible_leader_replicas", _INT32S, first_version=2, is_array=True, nullable_from=2, tag=1),
        Field("last_known_elr", _INT32S, first_version=2, is_array=True, nullable_from=2, tag=2),
    ),
)
CONFIG_RECORD = Schema(
    "ConfigRecord",
    0,
    0,
    0,
    (
        Field("resource_type", "int8"),
        Field("resource_name", "string"),
        Field("name", "string"),
        Field("value", "string", nullable_from=0),
    ),
)
PARTITION_CHANGE_RECORD = Schema(
    "PartitionChangeRecord",
    0,
    2,
    0,
    (
        Field("partition_id", _INT32S, default=-1),
        Field("topic_id", "uuid"),
        Field("isr", _INT32S, is_array=True, tag=0, nullable_from=0),
        Field("leader", _INT32S, tag=1, default=-2),
        Field("replicas", _INT32S, is_array=True, tag=2, nullable_from=0),
        Field("removing_replicas", _INT32S, is_array=True, tag=3, nullable_from=0),
        Field("adding_replicas", _INT32S, is_array=True, tag=4, nullable_from=0),
        Field("leader_recovery_state", "int8", tag=5, default=-1),
        Field("directories", "uuid", first_version=1, is_array=True, nullable_from=1, tag=8),
        Field("eligible_leader_replicas", _INT32S, first_version=2, is_array=True, nullable_from=2, tag=6),
        Field("last_known_elr", _INT32S, first_version=2, is_array=True, nullable_from=2, tag=7),
    ),
)
REMOVE_TOPIC_RECORD = Schema("RemoveTopicRecord", 0, 0, 0, (Field("topic_id", "uuid"),))
FEATURE_LEVEL_RECORD = Schema(
    "FeatureLevelRecord", 0, 0, 0, (Field("name", "string"), Field("feature_level", "int16"))
)
NO_OP_RECORD = Schema("NoOpRecord", 0, 0, 0, ())
BEGIN_TRANSACTION_RECORD = Schema(
    "BeginTransactionRecord", 0, 0, 0, (Field("name", "string", nullable_from=0, tag=0),)
)
END_TRANSACTION_RECORD = Schema("EndTransactionRecord", 0, 0, 0, ())
ABORT_TRANSACTION_RECORD = Schema(
    "AbortTransactionRecord", 0, 0, 0, (Field("reason", "string", nullable_from=0, tag=0),)
)
PRODUCER_IDS_RECORD = Schema(
    "ProducerIdsRecord",
    0,
    0,
    0,
    (
        Field("broker_id", _INT32S),
        Field("broker_epoch", "int64", default=-1),
        Field("next_producer_id", "int64"),
    ),
)

METADATA_SCHEMAS: Mapping[int, Schema] = {
    TOPIC_RECORD_KEY: TOPIC_RECORD,
    PARTITION_RECORD_KEY: PARTITION_RECORD,
    CONFIG_RECORD_KEY: CONFIG_RECORD,
    PARTITION_CHANGE_RECORD_KEY: PARTITION_CHANGE_RECORD,
    REMOVE_TOPIC_RECORD_KEY: REMOVE_TOPIC_RECORD,
    12: FEATURE_LEVEL_RECORD,
    15: PRODUCER_IDS_RECORD,
    20: NO_OP_RECORD,
    23: BEGIN_TRANSACTION_RECORD,
    24: END_TRANSACTION_RECORD,
    25: ABORT_TRANSACTION_RECORD,
}

CONTROL_SCHEMAS: Mapping[ControlRecordType, Schema] = {
    ControlRecordType.SNAPSHOT_HEADER: Schema(
        "SnapshotHeaderRecord",
        0,
        0,
        0,
        (Field("version", "int16"), Field("last_contained_log_timestamp", "int64")),
    ),
    ControlRecordType.SNAPSHOT_FOOTER: Schema("SnapshotFooterRecord", 0, 0, 0, (Field("version", "int16"),)),
    ControlRecordType.KRAFT_VERSION: Schema(
        "KRaftVersionRecord", 0, 0, 0, (Field("version", "int16"), Field("kraft_version", "int16"))
    ),
}
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
    """One decoded record: its api key and version, its kind (the record's name) and, for the kinds with
    a schema here, its fields (``None``: a kind logcleaner skips)."""

    api_key: int
    version: int
    kind: str
    fields: dict[str, object] | None


def decode_metadata_record(value: bytes | None) -> MetadataRecord:
    """Decode one record value; ``CorruptDataError`` (position within the value) if it is not a frame of
    a known version, or its message does not fit the schema of its kind."""
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
    if schema is None:
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
    ``version`` (no metadata record has a field of those three names); a kind without a schema here has
    none.

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

"""Every KRaft metadata record kind, as Kafka 4.4 defines it, and the control records a dump decodes.

The tables below are Kafka's ``metadata/src/main/resources/common/metadata/*.json``, each version and each
tagged field, with the field names in snake_case (wire rules in ``service.storage.message_schema``). Every
metadata record is flexible from version 0. Api keys 6, 13 and 16 were never released and have no
schema; any other key Kafka adds later is shown by ``records.py`` as an unknown record.

``CONTROL_SCHEMAS`` are the control records of ``clients/src/main/resources/common/message/`` whose value
a dump decodes (version 0 only, their first field being their int16 ``version``).
"""

from __future__ import annotations

from collections.abc import Mapping

from service.storage.control import ControlRecordType
from service.storage.message_schema import Field, Schema

__all__ = [
    "CONFIG_RECORD_KEY",
    "CONTROL_SCHEMAS",
    "METADATA_SCHEMAS",
    "PARTITION_CHANGE_RECORD_KEY",
    "PARTITION_RECORD_KEY",
    "REMOVE_TOPIC_RECORD_KEY",
    "TOPIC_RECORD_KEY",
]

TOPIC_RECORD_KEY = 2
PARTITION_RECORD_KEY = 3
CONFIG_RECORD_KEY = 4
PARTITION_CHANGE_RECORD_KEY = 5
REMOVE_TOPIC_RECORD_KEY = 9

_INT32 = "int32"


def _record(name: str, fields: tuple[Field, ...], *, last_version: int = 0) -> Schema:
    """A metadata record: versions 0 to ``last_version``, all of them flexible."""
    return Schema(name, 0, last_version, 0, fields)


def _broker_ids(
    name: str, *, first_version: int = 0, nullable_from: int | None = None, tag: int | None = None
) -> Field:
    """An ``[]int32`` of broker ids (replicas, ISR, ELR)."""
    return Field(
        name, _INT32, first_version=first_version, is_array=True, nullable_from=nullable_from, tag=tag
    )


# -- brokers and controllers ---------------------------------------------------------------------------

_ENDPOINT = (
    Field("name", "string"),
    Field("host", "string"),
    Field("port", "uint16"),
    Field("security_protocol", "int16"),
)
_FEATURE = (
    Field("name", "string"),
    Field("min_supported_version", "int16"),
    Field("max_supported_version", "int16"),
)
REGISTER_BROKER_RECORD = _record(
    "RegisterBrokerRecord",
    (
        Field("broker_id", _INT32),
        Field("is_migrating_zk_broker", "bool", first_version=2, default=False),
        Field("incarnation_id", "uuid"),
        Field("broker_epoch", "int64"),
        Field("end_points", "struct", is_array=True, fields=_ENDPOINT),
        Field("features", "struct", is_array=True, fields=_FEATURE),
        Field("rack", "string", nullable_from=0),
        Field("fenced", "bool", default=True),
        Field("in_controlled_shutdown", "bool", first_version=1, default=False),
        Field("log_dirs", "uuid", first_version=3, is_array=True, tag=0, default=[]),
        Field("cordoned_log_dirs", "uuid", first_version=4, is_array=True, nullable_from=4, tag=1),
    ),
    last_version=4,
)
UNREGISTER_BROKER_RECORD = _record(
    "UnregisterBrokerRecord", (Field("broker_id", _INT32), Field("broker_epoch", "int64"))
)
FENCE_BROKER_RECORD = _record("FenceBrokerRecord", (Field("id", _INT32), Field("epoch", "int64")))
UNFENCE_BROKER_RECORD = _record("UnfenceBrokerRecord", (Field("id", _INT32), Field("epoch", "int64")))
BROKER_REGISTRATION_CHANGE_RECORD = _record(
    "BrokerRegistrationChangeRecord",
    (
        Field("broker_id", _INT32),
        Field("broker_epoch", "int64"),
        Field("fenced", "int8", tag=0, default=0),
        Field("in_controlled_shutdown", "int8", first_version=1, tag=1, default=0),
        Field("log_dirs", "uuid", first_version=2, is_array=True, tag=2, default=[]),
        Field("cordoned_log_dirs", "uuid", first_version=3, is_array=True, nullable_from=3, tag=3),
    ),
    last_version=3,
)
REGISTER_CONTROLLER_RECORD = _record(
    "RegisterControllerRecord",
    (
        Field("controller_id", _INT32),
        Field("incarnation_id", "uuid"),
        Field("zk_migration_ready", "bool"),
        Field("end_points", "struct", is_array=True, fields=_ENDPOINT),
        Field("features", "struct", is_array=True, fields=_FEATURE),
    ),
)
UNREGISTER_CONTROLLER_RECORD = _record("UnregisterControllerRecord", (Field("controller_id", _INT32),))

# -- topics, partitions, configs -----------------------------------------------------------------------

TOPIC_RECORD = _record("TopicRecord", (Field("name", "string"), Field("topic_id", "uuid")))
PARTITION_RECORD = _record(
    "PartitionRecord",
    (
        Field("partition_id", _INT32, default=-1),
        Field("topic_id", "uuid"),
        _broker_ids("replicas"),
        _broker_ids("isr"),
        _broker_ids("removing_replicas"),
        _broker_ids("adding_replicas"),
        Field("leader", _INT32, default=-1),
        Field("leader_recovery_state", "int8", tag=0, default=0),
        Field("leader_epoch", _INT32, default=-1),
        Field("partition_epoch", _INT32, default=-1),
        Field("directories", "uuid", first_version=1, is_array=True),
        _broker_ids("eligible_leader_replicas", first_version=2, nullable_from=2, tag=1),
        _broker_ids("last_known_elr", first_version=2, nullable_from=2, tag=2),
    ),
    last_version=2,
)
PARTITION_CHANGE_RECORD = _record(
    "PartitionChangeRecord",
    (
        Field("partition_id", _INT32, default=-1),
        Field("topic_id", "uuid"),
        _broker_ids("isr", tag=0, nullable_from=0),
        Field("leader", _INT32, tag=1, default=-2),
        _broker_ids("replicas", tag=2, nullable_from=0),
        _broker_ids("removing_replicas", tag=3, nullable_from=0),
        _broker_ids("adding_replicas", tag=4, nullable_from=0),
        Field("leader_recovery_state", "int8", tag=5, default=-1),
        Field("directories", "uuid", first_version=1, is_array=True, nullable_from=1, tag=8),
        _broker_ids("eligible_leader_replicas", first_version=2, nullable_from=2, tag=6),
        _broker_ids("last_known_elr", first_version=2, nullable_from=2, tag=7),
    ),
    last_version=2,
)
REMOVE_TOPIC_RECORD = _record("RemoveTopicRecord", (Field("topic_id", "uuid"),))
CLEAR_ELR_RECORD = _record("ClearElrRecord", (Field("topic_name", "string"),))
CONFIG_RECORD = _record(
    "ConfigRecord",
    (
        Field("resource_type", "int8"),
        Field("resource_name", "string"),
        Field("name", "string"),
        Field("value", "string", nullable_from=0),
    ),
)

# -- security, quotas ----------------------------------------------------------------------------------

DELEGATION_TOKEN_RECORD = _record(
    "DelegationTokenRecord",
    (
        Field("owner", "string"),
        Field("requester", "string"),
        Field("renewers", "string", is_array=True),
        Field("issue_timestamp", "int64"),
        Field("max_timestamp", "int64"),
        Field("expiration_timestamp", "int64"),
        Field("token_id", "string"),
    ),
)
REMOVE_DELEGATION_TOKEN_RECORD = _record("RemoveDelegationTokenRecord", (Field("token_id", "string"),))
USER_SCRAM_CREDENTIAL_RECORD = _record(
    "UserScramCredentialRecord",
    (
        Field("name", "string"),
        Field("mechanism", "int8"),
        Field("salt", "bytes"),
        Field("stored_key", "bytes"),
        Field("server_key", "bytes"),
        Field("iterations", _INT32),
    ),
)
REMOVE_USER_SCRAM_CREDENTIAL_RECORD = _record(
    "RemoveUserScramCredentialRecord", (Field("name", "string"), Field("mechanism", "int8"))
)
ACCESS_CONTROL_ENTRY_RECORD = _record(
    "AccessControlEntryRecord",
    (
        Field("id", "uuid"),
        Field("resource_type", "int8"),
        Field("resource_name", "string"),
        Field("pattern_type", "int8"),
        Field("principal", "string"),
        Field("host", "string"),
        Field("operation", "int8"),
        Field("permission_type", "int8"),
    ),
)
REMOVE_ACCESS_CONTROL_ENTRY_RECORD = _record("RemoveAccessControlEntryRecord", (Field("id", "uuid"),))
_ENTITY_DATA = (Field("entity_type", "string"), Field("entity_name", "string", nullable_from=0))
CLIENT_QUOTA_RECORD = _record(
    "ClientQuotaRecord",
    (
        Field("entity", "struct", is_array=True, fields=_ENTITY_DATA),
        Field("key", "string"),
        Field("value", "float64"),
        Field("remove", "bool"),
    ),
)

# -- features, producer ids, transactions, housekeeping ------------------------------------------------

FEATURE_LEVEL_RECORD = _record(
    "FeatureLevelRecord", (Field("name", "string"), Field("feature_level", "int16"))
)
PRODUCER_IDS_RECORD = _record(
    "ProducerIdsRecord",
    (
        Field("broker_id", _INT32),
        Field("broker_epoch", "int64", default=-1),
        Field("next_producer_id", "int64"),
    ),
)
NO_OP_RECORD = _record("NoOpRecord", ())
ZK_MIGRATION_STATE_RECORD = _record("ZkMigrationStateRecord", (Field("zk_migration_state", "int8"),))
BEGIN_TRANSACTION_RECORD = _record(
    "BeginTransactionRecord", (Field("name", "string", nullable_from=0, tag=0),)
)
END_TRANSACTION_RECORD = _record("EndTransactionRecord", ())
ABORT_TRANSACTION_RECORD = _record(
    "AbortTransactionRecord", (Field("reason", "string", nullable_from=0, tag=0),)
)

METADATA_SCHEMAS: Mapping[int, Schema] = {
    0: REGISTER_BROKER_RECORD,
    1: UNREGISTER_BROKER_RECORD,
    TOPIC_RECORD_KEY: TOPIC_RECORD,
    PARTITION_RECORD_KEY: PARTITION_RECORD,
    CONFIG_RECORD_KEY: CONFIG_RECORD,
    PARTITION_CHANGE_RECORD_KEY: PARTITION_CHANGE_RECORD,
    7: FENCE_BROKER_RECORD,
    8: UNFENCE_BROKER_RECORD,
    REMOVE_TOPIC_RECORD_KEY: REMOVE_TOPIC_RECORD,
    10: DELEGATION_TOKEN_RECORD,
    11: USER_SCRAM_CREDENTIAL_RECORD,
    12: FEATURE_LEVEL_RECORD,
    14: CLIENT_QUOTA_RECORD,
    15: PRODUCER_IDS_RECORD,
    17: BROKER_REGISTRATION_CHANGE_RECORD,
    18: ACCESS_CONTROL_ENTRY_RECORD,
    19: REMOVE_ACCESS_CONTROL_ENTRY_RECORD,
    20: NO_OP_RECORD,
    21: ZK_MIGRATION_STATE_RECORD,
    22: REMOVE_USER_SCRAM_CREDENTIAL_RECORD,
    23: BEGIN_TRANSACTION_RECORD,
    24: END_TRANSACTION_RECORD,
    25: ABORT_TRANSACTION_RECORD,
    26: REMOVE_DELEGATION_TOKEN_RECORD,
    27: REGISTER_CONTROLLER_RECORD,
    28: CLEAR_ELR_RECORD,
    29: UNREGISTER_CONTROLLER_RECORD,
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

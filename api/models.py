"""Request and response bodies of the admin routes (topics, configs, partitions, checkpoints, tasks).

Names and units: snake_case, offsets, sizes and timestamps (ms) as integers. The
``explain``, ``retention`` and ``clean`` documents are the CLI's own (built in ``service.core.reports`` and by
the cleaner); their models name the contract's fields and allow the extra ones the builders add.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    WithJsonSchema,
)

from service.config.topic_config import TOPIC_CONFIG_NAMES
from service.storage.log_files import (
    METADATA_TOPIC,
    METADATA_TOPIC_CREATION_PROHIBITED,
    is_valid_topic_name,
)

__all__ = [
    "SummaryDocument",
    "INT32_MAX",
    "MAX_PARTITIONS",
    "TOPIC_NAME_RULE",
    "Checkpoints",
    "CleanDocument",
    "CleanRequest",
    "ConfigPatchRequest",
    "CreateTopicRequest",
    "DeleteRecordsRequest",
    "DeleteRecordsResponse",
    "ExplainDocument",
    "Health",
    "Readiness",
    "Jobs",
    "PartitionDetail",
    "RetentionDocument",
    "StrayReplicas",
    "StrictDigits",
    "TopicConfigs",
    "TopicDeleted",
    "TopicDetail",
    "TopicList",
    "TopicName",
]

INT32_MAX = (1 << 31) - 1
MAX_PARTITIONS = 1000  # per request: a typo must not create a million directories
TOPIC_NAME_RULE = "1-249 characters of [a-zA-Z0-9._-], and not '.' or '..' (Kafka's rule)"

_FORBID = ConfigDict(extra="forbid")  # request models; their numbers are strict: "2", 2.0, true are not 2
_OPEN = ConfigDict(extra="allow")


def _check_topic_name(name: str) -> str:
    if not is_valid_topic_name(name):
        raise ValueError(f"invalid topic name {name!r}: use {TOPIC_NAME_RULE}")
    return name


TopicName = Annotated[
    str,
    AfterValidator(_check_topic_name),
    WithJsonSchema({"type": "string", "pattern": "^[a-zA-Z0-9._-]{1,249}$", "not": {"enum": [".", ".."]}}),
]


def _check_creatable_topic_name(name: str) -> str:
    """Checked with the request, so a refused creation stores nothing (not even its config overrides)."""
    if name == METADATA_TOPIC:
        raise ValueError(METADATA_TOPIC_CREATION_PROHIBITED)
    return name


NewTopicName = Annotated[TopicName, AfterValidator(_check_creatable_topic_name)]


_DECIMAL_DIGITS = re.compile(r"0|[1-9][0-9]*")
_MAX_DIGITS = 19  # Kafka's longest integer (int64)


def _decimal_digits(value: object) -> object:
    """A path or query integer as written: decimal digits, no sign, space, point or leading zero."""
    if isinstance(value, str):
        if not _DECIMAL_DIGITS.fullmatch(value):
            shown = repr(value) if len(value) <= 40 else repr(value[:40]) + "..."
            raise ValueError(
                f"{shown} is not a whole number in decimal digits (no sign, space, point or leading zero)"
            )
        if len(value) > _MAX_DIGITS:
            raise ValueError(
                f"a number of {len(value)} digits is out of range (at most {_MAX_DIGITS} digits)"
            )
    return value


StrictDigits = BeforeValidator(_decimal_digits)
"""Put on an ``int`` path or query parameter so that ``1.0``, `` 1`` or ``+1`` is 422, not coerced to 1."""


def _config_value(value: object) -> str | int | float | bool:
    if not isinstance(value, (str, int, float)):  # bool is an int
        raise ValueError("a config value must be a string or a number")
    return value


ConfigValueIn = Annotated[
    str | int | float | bool,
    PlainValidator(_config_value),
    WithJsonSchema({"type": ["string", "number", "boolean"]}),
]
"""A config value as sent: Kafka's string form or a JSON number (or boolean)."""
_CONFIG_NAME_SCHEMA = {"enum": list(TOPIC_CONFIG_NAMES)}
ConfigChanges = Annotated[
    dict[str, ConfigValueIn],
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": _CONFIG_NAME_SCHEMA,
            "additionalProperties": {"type": ["string", "number", "boolean"]},
        }
    ),
]
"""Topic config name → value; names and values are checked against the config table (422 naming one)."""
ConfigNames = Annotated[list[str], WithJsonSchema({"type": "array", "items": _CONFIG_NAME_SCHEMA})]


# -- requests ------------------------------------------------------------------------------------


class CreateTopicRequest(BaseModel):
    model_config = _FORBID
    name: NewTopicName
    partitions: int | None = Field(
        default=None, ge=1, le=MAX_PARTITIONS, strict=True, description="num.partitions if absent"
    )
    configs: ConfigChanges = Field(default_factory=dict, description="Topic config overrides")


class ConfigPatchRequest(BaseModel):
    model_config = _FORBID
    set: ConfigChanges = Field(default_factory=dict, description="Overrides to set")
    delete: ConfigNames = Field(default_factory=list, description="Overrides to remove")


class DeleteRecordsRequest(BaseModel):
    model_config = _FORBID
    before_offset: int = Field(
        ge=-1, strict=True, description="The new log start offset; -1: the high watermark"
    )


class CleanRequest(BaseModel):
    model_config = _FORBID
    topic: TopicName
    partition: int = Field(ge=0, le=INT32_MAX, strict=True)


# -- topics, configs, partitions -----------------------------------------------------------------


class TopicSummary(BaseModel):
    name: str
    partitions: int
    offline_partitions: list[int] = Field(
        default_factory=list,
        exclude_if=lambda v: not v,
        description="Partitions whose log dir is offline after an I/O error (absent if none)",
    )


class TopicList(BaseModel):
    topics: list[TopicSummary]


class PartitionSummary(BaseModel):
    partition: int
    log_dir: str
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    size_bytes: int
    segments: int
    offline: bool = Field(
        default=False,
        exclude_if=lambda v: not v,
        description="true (absent otherwise): its log dir is offline, the figures are the last known",
    )


class EffectiveConfig(BaseModel):
    name: str
    value: int | float | bool | str
    source: Literal[
        "override", "metadata", "internal-topic-default", "broker-dynamic", "broker", "default", "unknown"
    ]


class TopicDetail(BaseModel):
    name: str
    topic_id: str | None = Field(
        description="The topic id of partition.metadata (Kafka's base64 form); null when the dirs have none"
    )
    partitions: list[PartitionSummary]
    configs: dict[str, int | float | bool | str] = Field(
        description="The topic's overrides (logcleaner's), each value typed as in effective_configs"
    )
    effective_configs: list[EffectiveConfig] = Field(
        description="Every topic config's effective value and where it came from: logcleaner's override, "
        "the broker's metadata log, Kafka's creation default of an internal topic, its dynamic broker "
        "configs, the broker config file, or the default; unknown: the topic's own configs are not known "
        "(a broker's dir without its metadata log), the value shown is the broker's and the topic is held"
    )


class TopicDeleted(BaseModel):
    name: str
    partitions: list[int]


class ConfigEntryOut(BaseModel):
    name: str
    value: int | float | bool | str
    source: Literal[
        "override", "metadata", "internal-topic-default", "broker-dynamic", "broker", "default", "unknown"
    ]


class TopicConfigs(BaseModel):
    topic: str
    configs: list[ConfigEntryOut]


class SegmentInfo(BaseModel):
    base_offset: int
    size_bytes: int
    record_count: int | None = Field(description="null if the segment went away while counted")
    largest_timestamp: int
    largest_timestamp_source: str


class PartitionDetail(BaseModel):
    topic: str
    partition: int
    log_dir: str
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    high_watermark_source: Literal["leader-log-end", "checkpoint", "no-checkpoint"] = Field(
        description="leader-log-end: this node leads the partition alone (its log end, as Kafka's leader "
        "sets it); checkpoint: replication-offset-checkpoint's entry; no-checkpoint: a broker's partition "
        "the checkpoint does not list (the log start offset)"
    )
    recovery_point: int
    size_bytes: int
    cleanup_policy: str
    segments: list[SegmentInfo]
    dirty_ratio: float
    cleaner_checkpoint: int | None = Field(description="cleaner-offset-checkpoint entry (first dirty offset)")


class DeleteRecordsResponse(BaseModel):
    topic: str
    partition: int
    log_start_offset: int = Field(description="Kafka's low watermark after the call")
    log_end_offset: int


# -- checkpoints, retention, cleaner, scheduler, health --------------------------------------------


class CheckpointEntry(BaseModel):
    topic: str
    partition: int
    offset: int


class CheckpointFile(BaseModel):
    log_dir: str
    name: str
    entries: list[CheckpointEntry]
    error: str | None = Field(description="Why the file could not be read, else null")


class Checkpoints(BaseModel):
    checkpoints: list[CheckpointFile]


class DeletedSegmentOut(BaseModel):
    topic: str
    partition: int
    base_offset: int
    size_bytes: int
    reason: str


class RetentionDocument(BaseModel):
    dry_run: bool
    deleted: list[DeletedSegmentOut]


class ExplainSegment(BaseModel):
    model_config = _OPEN
    base_offset: int
    size_bytes: int
    largest_timestamp: int
    largest_timestamp_source: str
    verdict: Literal["delete", "keep"]
    reason: str


class ExplainCleaner(BaseModel):
    model_config = _OPEN
    dirty_ratio: float
    first_dirty_offset: int
    first_uncleanable_offset: int
    first_uncleanable_reason: str
    would_clean: bool
    reason: str


class ExplainPartition(BaseModel):
    model_config = _OPEN
    topic: str
    partition: int
    log_dir: str
    stray: Literal[False] = False
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    cleanup_policy: str
    segments: list[ExplainSegment]
    cleaner: ExplainCleaner


class ExplainStraySegment(BaseModel):
    base_offset: int
    size_bytes: int
    verdict: Literal["keep"]
    reason: Literal["stray-replica"]


class ExplainStrayCleaner(BaseModel):
    would_clean: Literal[False]
    reason: Literal["stray-replica"]


class ExplainStrayReplica(BaseModel):
    """A stray replica (never loaded): its segment files, each kept, and why it is stray."""

    model_config = _OPEN
    topic: str
    partition: int
    topic_id: str | None
    log_dir: str
    path: str
    stray: Literal[True]
    reason: str
    size_bytes: int
    segments: list[ExplainStraySegment]
    cleaner: ExplainStrayCleaner


class ExplainDocument(BaseModel):
    partitions: list[Annotated[ExplainPartition | ExplainStrayReplica, Field(discriminator="stray")]]


class SummaryTopPartition(BaseModel):
    model_config = _OPEN
    topic: str | None
    partition: int | None
    bytes: int


class SummaryHeld(BaseModel):
    """The bytes one reason holds, over how many partitions, and the largest of them."""

    model_config = _OPEN
    reason: str
    bytes: int
    partitions: int
    top: list[SummaryTopPartition]


class SummaryReclaimable(BaseModel):
    model_config = _OPEN
    retention_now: int
    compaction: int
    compaction_estimated: bool


class SummaryDocument(BaseModel):
    """``logcleaner explain --summary --json``: every byte under one reason (``held`` adds up to
    ``total_bytes``), and what retention and compaction would free."""

    total_bytes: int
    partitions: int
    held: list[SummaryHeld]
    reclaimable: SummaryReclaimable
    generated_at: str


class CleanedPartition(BaseModel):
    model_config = _OPEN
    topic: str
    partition: int
    first_dirty_offset: int
    end_offset: int
    stats: dict[str, Any]


class CleanDocument(BaseModel):
    cleaned: list[CleanedPartition]


class JobOut(BaseModel):
    name: str
    period_ms: int | None = Field(description="null: one-shot, or rescheduled by itself")
    next_run_ms: int | None
    last_run_ms: int | None
    last_duration_ms: int | None
    last_error: str | None
    runs: int
    failures: int
    skipped: int


class Jobs(BaseModel):
    jobs: list[JobOut]


class Health(BaseModel):
    status: str


class Readiness(Health):
    offline_log_dirs: list[str] = Field(
        default_factory=list,
        exclude_if=lambda v: not v,
        description="Log dirs taken offline after an I/O error (absent if none; ready while one is online)",
    )


# -- load failures -----------------------------------------------------------------------------


class FailedPartitionOut(BaseModel):
    topic: str
    partition: int
    log_dir: str
    reason: str = Field(description="Why loading the partition dir failed (names the file where known)")


class SetAsideConfigFile(BaseModel):
    path: str = Field(description="The corrupt topic-config store copy")
    kept_as: str | None = Field(description="Where it was renamed aside; null if the rename failed")
    reason: str


class StrayReplicaOut(BaseModel):
    topic: str
    partition: int
    topic_id: str | None = Field(description="The dir's topic id (partition.metadata); null without one")
    log_dir: str
    path: str = Field(description="The partition dir, as it is (logcleaner never renames it)")
    reason: str = Field(description="Why it is not the topic's replica")


class StrayReplicas(BaseModel):
    partitions: list[StrayReplicaOut] = Field(
        description="Stray replicas found at start-up: never retained, cleaned or deleted; not served"
    )


class LoadFailures(BaseModel):
    partitions: list[FailedPartitionOut] = Field(
        description="Partitions left out at start-up (not served; their records are untouched)"
    )
    topic_config_files: list[SetAsideConfigFile] = Field(
        description="Corrupt topic-config store copies renamed aside (their topics run on broker defaults "
        "unless another log dir's copy was readable)"
    )

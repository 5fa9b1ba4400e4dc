"""``/v1/topics/{t}/partitions``: one partition's log in detail, DeleteRecords, and CreatePartitions."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from api.deps import Context, PartitionId, TopicPath, find_log
from api.json_body import BoundedJsonRoute
from api.models import (
    INT32_MAX,
    MAX_PARTITIONS,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    PartitionDetail,
    TopicDetail,
)
from api.problems import invalid, problem_responses
from api.routes.topics import topic_detail
from service.base.errors import CorruptDataError
from service.core.cleanable import cleaner_checkpoints, log_to_clean
from service.storage.log import PartitionLog
from service.storage.segment import LogSegment

__all__ = ["router"]

router = APIRouter(prefix="/v1/topics/{topic}/partitions", tags=["partitions"], route_class=BoundedJsonRoute)


class CreatePartitionsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int = Field(ge=1, le=INT32_MAX, strict=True, description="The new total number of partitions")


@router.post("", response_model=TopicDetail, responses=problem_responses(404, 422))
def create_partitions(context: Context, topic: TopicPath, body: CreatePartitionsRequest) -> TopicDetail:
    """Kafka's CreatePartitions: grow the topic to ``count`` partitions (never shrink), by at most
    1000 in one request."""
    manager = context.service.log_manager
    with context.admin_lock:
        existing = len(manager.topics().get(topic, []))
        if existing and body.count - existing > MAX_PARTITIONS:
            raise invalid(
                "count", f"adds {body.count - existing} partitions; at most {MAX_PARTITIONS} at once"
            )
        manager.create_partitions(topic, body.count)
    return topic_detail(context.service, topic)


@router.get("/{partition}", response_model=PartitionDetail, responses=problem_responses(404, 422))
def get_partition(context: Context, topic: TopicPath, partition: PartitionId) -> PartitionDetail:
    """Offsets, size, segments (base offset, size, record count, largest timestamp and its source),
    dirty ratio and cleaner checkpoint."""
    log = find_log(context, topic, partition)
    manager = context.service.log_manager
    checkpoint = _cleaner_checkpoint(log)
    with log.lock:
        segments = log.segments
        doc: dict[str, object] = {
            "topic": topic,
            "partition": partition,
            "log_dir": str(log.directory.parent),
            "log_start_offset": log.log_start_offset,
            "log_end_offset": log.log_end_offset,
            "high_watermark": log.high_watermark,
            "high_watermark_source": str(log.high_watermark_source),
            "recovery_point": log.recovery_point,
            "size_bytes": log.size_bytes,
            "cleanup_policy": ",".join(sorted(log.config.cleanup_policy)),
            "dirty_ratio": round(log_to_clean(log, checkpoint, manager.clock.now_ms()).cleanable_ratio, 6),
            "cleaner_checkpoint": checkpoint,
        }
    doc["segments"] = [_segment_info(s) for s in segments]  # reads files: outside the log's lock
    return PartitionDetail.model_validate(doc)


@router.post(
    "/{partition}/delete-records",
    response_model=DeleteRecordsResponse,
    responses=problem_responses(404, 409, 416, 422),
)
def delete_records(
    context: Context, topic: TopicPath, partition: PartitionId, body: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    """Kafka's DeleteRecords: advance the log start offset to ``before_offset`` (at most the high
    watermark; -1 means the high watermark). Retention then deletes the segments wholly below it. A
    topic whose ``cleanup.policy`` has no ``delete`` refuses it: 409, ``"error": "POLICY_VIOLATION"``."""
    log = find_log(context, topic, partition)
    target = log.high_watermark if body.before_offset == -1 else body.before_offset
    log.delete_records(target)
    return DeleteRecordsResponse(
        topic=topic,
        partition=partition,
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
    )


def _cleaner_checkpoint(log: PartitionLog) -> int | None:
    try:
        return cleaner_checkpoints([log]).get(log.topic_partition)
    except (OSError, CorruptDataError):
        return None


def _segment_info(segment: LogSegment) -> dict[str, object]:
    try:
        largest, source = segment.largest_timestamp()
        count: int | None = sum(batch.records_count for batch in segment.batches())
    except (OSError, CorruptDataError):  # deleted or replaced while we read it
        largest, source = -1, "unknown"
        count = None
    return {
        "base_offset": segment.base_offset,
        "size_bytes": segment.size_bytes,
        "record_count": count,
        "largest_timestamp": largest,
        "largest_timestamp_source": source,
    }

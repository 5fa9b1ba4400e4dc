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
from service.storage.topic_partition import TopicPartition

__all__ = ["router"]

router = APIRouter(prefix="/v1/topics/{topic}/partitions", tags=["partitions"], route_class=BoundedJsonRoute)


class CreatePartitionsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int = Field(ge=1, le=INT32_MAX, strict=True, description="The new total number of partitions")


@router.post("", response_model=TopicDetail, responses=problem_responses(404, 422))
def create_partitions(context: Context, topic: TopicPath, body: CreatePartitionsRequest) -> TopicDetail:
    """Kafka's CreatePartitions: grow the topic to ``count`` partitions (never shrink), by at most
    1000 in one request."""
    logs = context.service.logs
    with context.admin_lock:
        existing = len(logs.topics().get(topic, []))
        if existing and body.count - existing > MAX_PARTITIONS:
            raise invalid(
                "count", f"adds {body.count - existing} partitions; at most {MAX_PARTITIONS} at once"
            )
        logs.create_partitions(topic, body.count)
    return topic_detail(context.service, topic)


@router.get("/{partition}", response_model=PartitionDetail, responses=problem_responses(404, 422))
def get_partition(context: Context, topic: TopicPath, partition: PartitionId) -> PartitionDetail:
    """Offsets, size, segments (base offset, size, record count, largest timestamp and its source),
    dirty ratio and cleaner checkpoint."""
    document = context.service.logs.partition_document(TopicPartition(topic, partition))
    return PartitionDetail.model_validate(document)


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

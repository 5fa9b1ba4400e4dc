"""``/v1/topics/{t}/partitions/{p}/records``: produce (all or nothing) and fetch (Kafka's semantics).

Produce reads the raw body and validates it once with pydantic's JSON parser (``api.produce``); its
request schema is added to the OpenAPI document by ``api.openapi``. Both run in the thread pool.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from api.deps import ApiContext, Context, PartitionId, TopicPath, find_log
from api.fetch import fetch_document
from api.models import StrictDigits
from api.problems import invalid, problem_responses
from api.produce import append_request
from api.record_models import FetchResponse, ProduceResponse
from service.storage.log_config import LONG_MAX

__all__ = ["PRODUCE_PATH", "router"]

router = APIRouter(prefix="/v1/topics/{topic}/partitions/{partition}/records", tags=["records"])
PRODUCE_PATH = "/v1/topics/{topic}/partitions/{partition}/records"
_DEFAULT_MAX_RECORDS = 500


@router.post(
    "",
    response_model=ProduceResponse,
    responses=problem_responses(404, 413, 422),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ProduceRequest"}}},
        }
    },
)
async def produce(
    context: Context, topic: TopicPath, partition: PartitionId, request: Request
) -> ProduceResponse:
    """Append the records as one producer request: every record is validated (JSON shape, data, and the
    log's rules: keys on compacted topics, KIP-937 timestamp bounds) before any is appended."""
    body = await request.body()
    return await run_in_threadpool(_produce, context, topic, partition, body)


def _produce(context: ApiContext, topic: str, partition: int, body: bytes) -> ProduceResponse:
    log = find_log(context, topic, partition)
    now_ms = context.service.logs.now_ms()
    limit = context.settings.max_records_per_request
    return append_request(log, body, context.produce_model, max_records=limit, now_ms=now_ms)


@router.get("", response_model=FetchResponse, responses=problem_responses(404, 416, 422, 500))
def fetch(
    context: Context,
    topic: TopicPath,
    partition: PartitionId,
    offset: Annotated[
        int | None,
        StrictDigits,
        Query(ge=0, le=LONG_MAX, description="First offset; the log start offset if absent"),
    ] = None,
    max_records: Annotated[
        int | None,
        StrictDigits,
        Query(ge=1, description="At most this many records (500 if absent; up to api.max.fetch.records)"),
    ] = None,
) -> JSONResponse:
    """Records from ``offset`` on; a compacted-away offset gives the next record. Key, value and header
    values come back as BINARY (base64)."""
    limit = context.settings.max_fetch_records
    if max_records is None:
        max_records = min(_DEFAULT_MAX_RECORDS, limit)
    elif max_records > limit:
        raise invalid(
            "max_records", f"{max_records} is more than the limit of {limit} (api.max.fetch.records)"
        )
    log = find_log(context, topic, partition)
    start = log.log_start_offset if offset is None else offset
    document = fetch_document(
        log,
        start,
        max_records=max_records,
        max_bytes=context.settings.max_fetch_bytes,
        on_fault=context.on_fetch_fault,
    )
    return JSONResponse(document)

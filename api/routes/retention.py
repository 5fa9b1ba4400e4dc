"""``/v1/retention``: a ``kafka-log-retention`` pass now, and the ``explain`` view of ``logcleaner explain``.

The pass is the scheduled task's: topic overrides refreshed, then retention for every non-compacted log
(paused for the cleaner meanwhile). Compacted logs' retention belongs to the cleaner threads, as in Kafka.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import Context
from api.models import INT32_MAX, ExplainDocument, RetentionDocument, StrictDigits, TopicName
from api.problems import invalid, problem_responses

__all__ = ["router"]

router = APIRouter(prefix="/v1/retention", tags=["retention"])


@router.post("/run", response_model=RetentionDocument, responses=problem_responses(422))
def run_retention(
    context: Context,
    dry_run: Annotated[bool, Query(description="Report what would be deleted; change nothing")] = False,
) -> dict[str, object]:
    """One retention pass now: what it deleted (segments renamed ``.deleted``) and why."""
    return context.service.logs.run_retention(dry_run=dry_run)


@router.get("/explain", response_model=ExplainDocument, responses=problem_responses(404, 422))
def explain(
    context: Context,
    topic: Annotated[TopicName | None, Query(description="Only this topic")] = None,
    partition: Annotated[
        int | None, StrictDigits, Query(ge=0, le=INT32_MAX, description="Only this partition")
    ] = None,
) -> dict[str, object]:
    """Per partition and segment: what retention would do and why; the cleaner's view of each log."""
    if partition is not None and topic is None:
        raise invalid("partition", "needs topic")
    return context.service.logs.explain(topic=topic, partition=partition)

"""``/v1/cleaner``: the log cleaner's status, a forced cleaning of one partition (the CLI's ``clean``), and
a retry of an uncleanable partition at the next selection.

All answer 409 when the daemon runs no cleaner (``log.cleaner.enable=false``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from api.deps import Context, PartitionId, TopicPath
from api.json_body import BoundedJsonRoute
from api.models import CleanDocument, CleanRequest
from api.problems import problem_responses
from service.base.errors import ConflictError
from service.core.ports import CleanerView
from service.storage.topic_partition import TopicPartition

__all__ = ["router"]

router = APIRouter(prefix="/v1/cleaner", tags=["cleaner"], route_class=BoundedJsonRoute)


@router.get("", response_model=dict[str, Any], responses=problem_responses(409))
def cleaner_status(context: Context) -> dict[str, object]:
    """Threads, in-progress and uncleanable partitions, the last runs' stats."""
    return _view(context.service.cleaner_view).status()


@router.post("/run", response_model=CleanDocument, responses=problem_responses(404, 409, 422))
def clean_now(context: Context, body: CleanRequest) -> dict[str, object]:
    """Clean one compacted partition now, whatever its dirty ratio (never past its first uncleanable
    offset); returns the ``clean`` document of ``logcleaner clean --json``."""
    view = _view(context.service.cleaner_view)
    return {"cleaned": [view.clean_partition(TopicPartition(body.topic, body.partition))]}


@router.post(
    "/uncleanable/{topic}/{partition}/retry",
    status_code=202,
    response_model=dict[str, Any],
    responses=problem_responses(404, 409, 422),
)
def retry_uncleanable(context: Context, topic: TopicPath, partition: PartitionId) -> dict[str, object]:
    """Try an uncleanable partition again at the cleaner's next selection, whatever its retry backoff
    (``log.cleaner.uncleanable.retry.backoff.ms``); returns its ``uncleanable`` entry, its retry now due.
    404 when the partition is not uncleanable."""
    return _view(context.service.cleaner_view).retry_uncleanable(TopicPartition(topic, partition))


def _view(view: CleanerView | None) -> CleanerView:
    if view is None:
        raise ConflictError("the log cleaner is not running (log.cleaner.enable=false)")
    return view

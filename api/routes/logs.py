"""``/v1/logs``: what start-up left out, and why. ``failed``: partitions that could not load, corrupt
topic-config store copies set aside (the daemon runs without them; an operator repairs the files and
restarts). ``stray``: stray replicas (``service.core.stray_replicas``), never retained, cleaned or deleted."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import Context
from api.models import LoadFailures, StrayReplicas

__all__ = ["router"]

router = APIRouter(prefix="/v1/logs", tags=["logs"])


@router.get("/failed", response_model=LoadFailures)
def load_failures(context: Context) -> LoadFailures:
    """Partitions that failed to load (an I/O error takes the whole log dir offline instead) and corrupt
    topic-config store copies kept aside."""
    service = context.service
    failed = service.logs.failed_partitions
    return LoadFailures.model_validate(
        {
            "partitions": [
                {
                    "topic": f.topic_partition.topic,
                    "partition": f.topic_partition.partition,
                    "log_dir": str(f.path.parent),
                    "reason": f.reason,
                }
                for f in failed
            ],
            "topic_config_files": [
                {
                    "path": str(a.path),
                    "kept_as": None if a.kept_as is None else str(a.kept_as),
                    "reason": a.reason,
                }
                for a in service.logs.set_aside_config_files
            ],
        }
    )


@router.get("/stray", response_model=StrayReplicas)
def stray_replicas(context: Context) -> StrayReplicas:
    """Partition dirs that are not their topic's replica (Kafka's ``-stray`` dirs, and dirs whose topic id
    is not the topic's): listed here, left as they are on disk."""
    strays = context.service.logs.stray_replicas
    return StrayReplicas.model_validate(
        {
            "partitions": [
                {
                    "topic": s.topic_partition.topic,
                    "partition": s.topic_partition.partition,
                    "topic_id": s.topic_id,
                    "log_dir": str(s.log_dir),
                    "path": str(s.path),
                    "reason": s.reason,
                }
                for s in strays
            ]
        }
    )

"""``/v1/logs/failed``: what start-up could not load, and why: partitions left out, corrupt topic-config
store copies set aside. The daemon runs without them; an operator repairs the files and restarts."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import Context
from api.models import LoadFailures

__all__ = ["router"]

router = APIRouter(prefix="/v1/logs", tags=["logs"])


@router.get("/failed", response_model=LoadFailures)
def load_failures(context: Context) -> LoadFailures:
    """Partitions that failed to load (an I/O error takes the whole log dir offline instead) and corrupt
    topic-config store copies kept aside."""
    service = context.service
    failed = sorted(service.log_manager.failed_partitions.values(), key=lambda f: f.topic_partition)
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
                for a in service.topic_store.set_aside
            ],
        }
    )

"""``/v1/checkpoints``: the offset checkpoint files of every log dir (the high watermarks' too), parsed
(missing = empty)."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import Context
from api.models import Checkpoints
from api.problems import problem_responses
from service.base.errors import NotFoundError
from service.storage.log_files import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)

__all__ = ["CHECKPOINT_NAMES", "router"]

router = APIRouter(prefix="/v1/checkpoints", tags=["checkpoints"])

CHECKPOINT_NAMES = (
    RECOVERY_POINT_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)


@router.get("", response_model=Checkpoints)
def all_checkpoints(context: Context) -> Checkpoints:
    """Every checkpoint file of every log dir."""
    return _checkpoints(context, CHECKPOINT_NAMES)


@router.get("/{name}", response_model=Checkpoints, responses=problem_responses(404, 422))
def one_checkpoint(context: Context, name: str) -> Checkpoints:
    """One checkpoint file (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
    ``cleaner-offset-checkpoint`` or ``replication-offset-checkpoint``) of every log dir."""
    if name not in CHECKPOINT_NAMES:
        raise NotFoundError(f"no checkpoint named {name!r}; there are: {', '.join(CHECKPOINT_NAMES)}")
    return _checkpoints(context, (name,))


def _checkpoints(context: Context, names: tuple[str, ...]) -> Checkpoints:
    return Checkpoints.model_validate({"checkpoints": context.service.logs.checkpoints(names)})

"""``/v1/explain``: the whole-broker summary of ``logcleaner explain --summary``, from the daemon.

The document is the one the daemon keeps ready (``service.core.summary_cache``, refreshed by its scheduled
task): a request reads it and never walks the logs, at any partition count.
"""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import Context
from api.models import SummaryDocument

__all__ = ["router"]

router = APIRouter(prefix="/v1/explain", tags=["retention"])


@router.get("/summary", response_model=SummaryDocument)
def explain_summary(context: Context) -> dict[str, object]:
    """Every byte of every partition dir under one reason (docs/bytes-held.md), what a retention pass would
    delete now and what cleaning would free (``compaction_estimated``: from key sketches)."""
    return context.service.explain_summary.document()

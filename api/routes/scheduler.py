"""``/v1/scheduler/jobs``: each scheduled task with its period, next and last run, duration and error."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import Context
from api.models import Jobs

__all__ = ["router"]

router = APIRouter(prefix="/v1/scheduler", tags=["scheduler"])


@router.get("/jobs", response_model=Jobs)
def jobs(context: Context) -> Jobs:
    """Every named task (Kafka's names), one-shot ``delete-file`` tasks included once seen."""
    return Jobs.model_validate(
        {
            "jobs": [
                {
                    "name": job.name,
                    "period_ms": job.period_ms,
                    "next_run_ms": job.next_run_ms,
                    "last_run_ms": job.last_run_ms,
                    "last_duration_ms": job.last_duration_ms,
                    "last_error": job.last_error,
                    "runs": job.runs,
                    "failures": job.failures,
                    "skipped": job.skipped,
                }
                for job in context.service.scheduler.jobs()
            ]
        }
    )

"""``/healthz``, ``/readyz`` and ``/metrics``: always open (no bearer token), outside ``/v1``."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CollectorRegistry

from api.deps import Context
from api.metrics.exposition import expose
from api.models import Health, Readiness
from api.problems import problem_response, problem_responses

__all__ = ["build_router"]


def build_router(registry: CollectorRegistry) -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/healthz", response_model=Health)
    async def healthz() -> Health:
        """Liveness: the process serves requests."""
        return Health(status="ok")

    @router.get("/readyz", response_model=Readiness, responses=problem_responses(503))
    async def readyz(context: Context) -> Readiness | Response:
        """Readiness: every log dir is loaded and recovered, and at least one is online; the offline ones
        (taken offline after an I/O error) are listed."""
        logs = context.service.logs
        if not logs.is_loaded:
            return problem_response(503, "the logs are not loaded yet")
        offline = sorted(str(path) for path in logs.offline_dirs)
        if len(offline) == len(logs.log_dirs):
            return problem_response(
                503,
                f"every log dir is offline: {', '.join(offline)}",
                extensions={"offline_log_dirs": offline},
            )
        return Readiness(status="ready", offline_log_dirs=offline)

    @router.get(
        "/metrics",
        response_class=Response,
        responses={
            200: {
                "content": {
                    "text/plain": {"schema": {"type": "string"}},
                    "application/openmetrics-text": {"schema": {"type": "string"}},
                }
            }
        },
    )
    def metrics(request: Request) -> Response:
        """The daemon's metrics: OpenMetrics if ``Accept`` asks for ``application/openmetrics-text``,
        else Prometheus' text format."""
        body, content_type = expose(registry, request.headers.get("accept"))
        return Response(body, media_type=content_type)

    return router

"""``create_app``: the FastAPI application over the node's ``LogService``.

The composition root (``service.shell.node.build_api_server``) hands in everything: the ``LogService`` (its
``NodeView``), the metrics' registry and the ``ApiSettings`` it built from the broker config; the API reads
no configuration of its own.

Routers per resource under ``/v1``; problem+json for every error; the guards (``Host`` and ``Origin``,
bearer auth, encoded slashes, JSON bodies, body limit) as ASGI middleware in front of routing.
Everything is built here from the injected service, registry and settings: no module-level state.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from prometheus_client import CollectorRegistry

from api.auth import BearerAuthMiddleware
from api.deps import ApiContext, ApiSettings, LogService
from api.fetch import FetchFaultRecorder
from api.guards import BodyLimitMiddleware, EncodedSlashGuard, JsonContentTypeGuard
from api.head_requests import HeadAsGetMiddleware
from api.network_guards import HostGuard, OriginGuard
from api.openapi import install_openapi
from api.problems import install_problem_handlers
from api.produce import produce_request_model
from api.readiness import ReadinessGuard
from api.routes import (
    checkpoints,
    cleaner,
    explain,
    health,
    logs,
    partitions,
    records,
    retention,
    scheduler,
    topics,
)
from service.core.version import package_version

__all__ = ["DOCS_ASSETS_PATH", "create_app"]

DOCS_ASSETS_PATH = "/docs/static"  # Swagger UI's script, stylesheet and icon (fastapi-offline ships them)

_DESCRIPTION = (
    "Kafka's log management over HTTP: topics and their configs, produce and fetch, DeleteRecords, "
    "checkpoints, retention, the log cleaner and the scheduled tasks. Errors are RFC 9457 problems."
)


def _uncounted(_kind: str) -> None:
    pass


def create_app(
    service: LogService,
    registry: CollectorRegistry,
    *,
    settings: ApiSettings,
    not_ready: Callable[[], str | None] | None = None,
    on_fetch_fault: FetchFaultRecorder | None = None,
) -> FastAPI:
    """The API of ``service`` with ``settings`` (``service.shell.node.build_api_settings``: the broker's
    ``api.*`` keys and the token); ``/metrics`` serves ``registry``. ``not_ready()`` (the daemon's start-up
    and stop) makes ``/readyz`` and ``/v1`` answer 503 with its reason while it returns one.
    ``on_fetch_fault`` is told each fault a fetch meets (the metrics' ``FetchFaults.record``; the log names
    them either way)."""
    produce_model = produce_request_model(settings.max_records_per_request)
    app = FastAPIOffline(  # /docs with Swagger UI's files served from here: no CDN, works offline
        title="logcleaner",
        version=package_version(),
        description=_DESCRIPTION,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
        static_url=DOCS_ASSETS_PATH,
        swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from swagger.io's validator
    )
    app.state.context = ApiContext(service, settings, produce_model, on_fetch_fault or _uncounted)
    install_problem_handlers(app)
    app.include_router(health.build_router(registry))
    for module in (topics, partitions, records, checkpoints, retention, explain, cleaner, scheduler, logs):
        app.include_router(module.router)
    # The last added runs first: HEAD as GET, Host, Origin, auth, encoded slashes, the body's type and size,
    # readiness.
    if not_ready is not None:
        app.add_middleware(ReadinessGuard, not_ready=not_ready)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    app.add_middleware(JsonContentTypeGuard)
    app.add_middleware(EncodedSlashGuard)
    if settings.auth_token is not None:
        app.add_middleware(BearerAuthMiddleware, token=settings.auth_token)
    app.add_middleware(OriginGuard, allowed_origins=settings.allowed_origins)
    app.add_middleware(HostGuard, bound_host=settings.bound_host, allowed_hosts=settings.allowed_hosts)
    app.add_middleware(HeadAsGetMiddleware)
    install_openapi(
        app,
        raw_bodies={"ProduceRequest": produce_model},
        query_maximums={"max_records": settings.max_fetch_records},
        auth=settings.auth_token is not None,
    )
    return app

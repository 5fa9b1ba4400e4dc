"""``ReadinessGuard``: ``/readyz`` and every ``/v1`` route answer 503 while the daemon is not ready.

The HTTP server listens before the logs are loaded (so ``/healthz`` and ``/metrics`` answer from the first
second) and while the daemon stops. ``not_ready()`` says why (``loading: 1,234 of 10,000 logs``,
``stopping``), or None once every log is loaded and recovered; its text is the problem's ``detail``.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from api.problems import problem_response

__all__ = ["ReadinessGuard"]

_GUARDED_PREFIX = "/v1/"
_READYZ = "/readyz"


class ReadinessGuard:
    def __init__(self, app: ASGIApp, *, not_ready: Callable[[], str | None]) -> None:
        self.app = app
        self.not_ready = not_ready

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if path == _READYZ or path.startswith(_GUARDED_PREFIX):
                reason = self.not_ready()
                if reason is not None:
                    response = problem_response(503, reason, headers={"Retry-After": "1"})
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)

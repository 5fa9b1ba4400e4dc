"""HEAD answered as GET without the body, on every route (RFC 9110: HEAD is GET without content).

FastAPI registers a route for the methods it is declared with, so every ``GET`` route, ``/metrics``
included, answered ``HEAD`` with 405, which ``curl -I``, uptime probes and caches trip on. Starlette's own
``Route`` adds HEAD to each GET; this does it for the whole app, in front of the guards and routing, which
so see a GET: the status and headers (``Content-Length`` too) are the GET's, and the body is dropped.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HeadAsGetMiddleware"]


class HeadAsGetMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_without_body)

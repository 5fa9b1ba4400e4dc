"""Request guards that run before routing, as ASGI middleware.

``BodyLimitMiddleware``: a body over ``api.max.request.bytes`` is a 413 that names the limit. A declared
``Content-Length`` over it is refused before a byte is read; a chunked body is counted as it arrives
and refused as soon as it passes the limit, so no request makes the daemon buffer more than the limit.

``EncodedSlashGuard``: the server decodes ``%2F`` before routing, so ``/v1/topics/a%2Fb/configs`` would
reach topic ``a``'s configs. A topic segment holding an encoded ``/`` is answered 422 (not a topic name).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.models import TOPIC_NAME_RULE
from api.problems import ApiProblem, invalid, problem_response

__all__ = ["BodyLimitMiddleware", "EncodedSlashGuard"]

_LIMIT_KEY = "api.max.request.bytes"


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self, size: str) -> ApiProblem:
        return ApiProblem(
            413,
            f"the request body ({size}) is larger than the limit of {self.max_bytes} bytes ({_LIMIT_KEY})",
            extensions={"max_request_bytes": self.max_bytes},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            problem = self._too_large(f"{declared} bytes")
            response = problem_response(
                413, str(problem.detail), extensions=problem.extensions, headers={"Connection": "close"}
            )
            await response(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise self._too_large(f"more than {self.max_bytes} bytes so far")
            return message

        await self.app(scope, counting_receive, send)


class EncodedSlashGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if isinstance(raw, bytes) and b"%2f" in raw.lower():
            segments = raw.split(b"/")
            if len(segments) > 3 and segments[1:3] == [b"v1", b"topics"] and b"%2f" in segments[3].lower():
                problem = invalid("topic", f"a topic name cannot contain '/': use {TOPIC_NAME_RULE}")
                response = problem_response(422, str(problem.detail), errors=problem.errors)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the HTTP server rejects a malformed length itself
    return None

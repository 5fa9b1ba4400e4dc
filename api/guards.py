"""Request guards that run before routing, as ASGI middleware.

``BodyLimitMiddleware``: a body over ``api.max.request.bytes`` is a 413 that names the limit. A declared
``Content-Length`` over it is refused before a byte is read; a chunked body is counted as it arrives
and refused as soon as it passes the limit, so no request makes the daemon buffer more than the limit.

``EncodedSlashGuard``: the server decodes ``%2F`` before routing, so ``/v1/topics/a%2Fb/configs`` would
reach topic ``a``'s configs. A topic segment holding an encoded ``/`` is answered 422 (not a topic name).

``JsonContentTypeGuard``: every body the API reads is JSON, and a browser can send a cross-site
``text/plain`` (or form, or untyped) body without asking first. A POST, PUT or PATCH whose
``Content-Type`` is not ``application/json`` (a ``charset`` of UTF-8 allowed), or that carries a body
without a ``Content-Type``, is 415 naming the expected type, before anything reads it. A POST without
a body and without a type (``curl -X POST …/retention/run``) passes.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.models import TOPIC_NAME_RULE
from api.problems import ApiProblem, invalid, problem_response

__all__ = ["BodyLimitMiddleware", "EncodedSlashGuard", "JsonContentTypeGuard"]

_LIMIT_KEY = "api.max.request.bytes"
JSON_TYPE = "application/json"
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_UTF8 = frozenset({"utf-8", "utf8"})


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


class JsonContentTypeGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in _BODY_METHODS:
            problem = _content_type_problem(scope)
            if problem is not None:
                accept = {"PATCH": "Accept-Patch"}.get(scope["method"], "Accept-Post")
                response = problem_response(
                    415, problem, extensions={"expected": JSON_TYPE}, headers={accept: JSON_TYPE}
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _content_type_problem(scope: Scope) -> str | None:
    """Why the request's body type is not taken, or ``None`` if it is JSON (or there is no body)."""
    content_type = None
    has_body = False
    for name, value in scope["headers"]:
        if name == b"content-type":
            content_type = bytes(value).decode("latin-1")
        elif name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"0", b"")):
            has_body = True
    if content_type is None:
        return f"the request has a body but no Content-Type: send {JSON_TYPE}" if has_body else None
    media_type, *parameters = (part.strip() for part in content_type.split(";"))
    if media_type.lower() != JSON_TYPE:
        return f"Content-Type {media_type!r} is not accepted: send {JSON_TYPE}"
    for parameter in parameters:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "charset" and value.strip().strip('"').lower() not in _UTF8:
            return f"charset {value.strip()!r} is not accepted: send {JSON_TYPE} in UTF-8"
    return None


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the HTTP server rejects a malformed length itself
    return None

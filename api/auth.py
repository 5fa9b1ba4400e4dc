"""Bearer-token authentication of ``/v1``: ASGI middleware, before anything reads the body.

With ``api.auth.token.file`` set, every ``/v1`` request needs ``Authorization: Bearer <token>``; the token
is the file's content without surrounding whitespace, compared in constant time. ``/healthz``, ``/readyz``,
``/metrics`` and the docs stay open. A failure is a 401 problem with ``WWW-Authenticate`` (RFC 6750).
"""

from __future__ import annotations

import hmac
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from api.problems import problem_response
from service.config.definitions import InvalidConfigError

__all__ = ["BearerAuthMiddleware", "read_token_file"]

_KEY = "api.auth.token.file"
_PROTECTED_PREFIX = "/v1"


def read_token_file(path: str) -> str:
    """The token in ``path``, stripped; an unreadable or empty file stops start-up naming the key."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidConfigError(
            f"Invalid value {path!r} for configuration {_KEY}: cannot read the token file: {exc}",
            name=_KEY,
            value=path,
        ) from exc
    if not token:
        raise InvalidConfigError(
            f"Invalid value {path!r} for configuration {_KEY}: the token file is empty; "
            "allowed: a file holding the bearer token",
            name=_KEY,
            value=path,
        )
    return token


class BearerAuthMiddleware:
    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _is_protected(scope["path"]):
            await self.app(scope, receive, send)
            return
        presented = _bearer_token(scope)
        if presented is not None and hmac.compare_digest(presented, self._token):
            await self.app(scope, receive, send)
            return
        if presented is None:
            challenge, detail = 'Bearer realm="logcleaner"', "this call needs Authorization: Bearer <token>"
        else:
            challenge = 'Bearer realm="logcleaner", error="invalid_token"'
            detail = "the bearer token is not valid"
        response = problem_response(401, detail, headers={"WWW-Authenticate": challenge})
        await response(scope, receive, send)


def _is_protected(path: str) -> bool:
    return path == _PROTECTED_PREFIX or path.startswith(_PROTECTED_PREFIX + "/")


def _bearer_token(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = bytes(value).strip().partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                return token.strip()
            return None
    return None

"""``ReadinessGuard``: ``/readyz`` and every ``/v1`` route answer 503 (problem+json, ``Retry-After: 1``, the
reason as the detail) while the daemon is not ready; ``/healthz``, ``/metrics`` and the rest pass through, and
everything does once it is ready. The guard is driven as the server drives it, one ASGI call per request.
(A daemon whose logs never loaded, over real HTTP, is in ``test_server.py``.)"""

from __future__ import annotations

import asyncio
import json

import pytest
from starlette.types import Message, Receive, Scope, Send

from api.problems import PROBLEM_JSON
from api.readiness import ReadinessGuard


async def downstream(scope: Scope, receive: Receive, send: Send) -> None:
    """The app behind the guard: 200 with the path it was asked for."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": scope["path"].encode()})


def request(guard: ReadinessGuard, path: str) -> tuple[int, dict[str, str], bytes]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b""}
    asyncio.run(guard(scope, receive, send))
    start, *bodies = sent
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, b"".join(m.get("body", b"") for m in bodies)


@pytest.mark.parametrize("path", ["/readyz", "/v1/topics", "/v1/topics/t/partitions/0/records"])
def test_not_ready_is_503_with_the_reason(path: str) -> None:
    guard = ReadinessGuard(downstream, not_ready=lambda: "loading: 1,234 of 10,000 logs")

    status, headers, body = request(guard, path)

    assert status == 503
    assert headers["content-type"] == PROBLEM_JSON and headers["retry-after"] == "1"
    assert json.loads(body)["detail"] == "loading: 1,234 of 10,000 logs"


@pytest.mark.parametrize("path", ["/healthz", "/metrics", "/openapi.json", "/v1"])
def test_the_open_paths_pass_while_not_ready(path: str) -> None:
    guard = ReadinessGuard(downstream, not_ready=lambda: "stopping")

    assert request(guard, path) == (200, {"content-type": "text/plain"}, path.encode())


def test_once_ready_everything_passes_and_the_reason_is_asked_at_each_request() -> None:
    reasons = ["loading: 0 of 1 logs", None]
    guard = ReadinessGuard(downstream, not_ready=lambda: reasons[0])

    assert request(guard, "/readyz")[0] == 503
    reasons.pop(0)
    assert request(guard, "/readyz") == (200, {"content-type": "text/plain"}, b"/readyz")
    assert request(guard, "/v1/topics")[0] == 200

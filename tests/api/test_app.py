"""``create_app``: the application over a node's parts, served by a real uvicorn (``ApiServer``). Every
router is mounted, ``/healthz`` stays open, and the guards run in their order: ``Host`` first, then the
bearer token, the body's type, readiness last. The daemon behind it is never started, so its logs are not
loaded (``not_ready`` says so)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api.app import create_app
from api.deps import ApiSettings
from api.server import ApiServer
from tests.api.conftest import assert_problem, running, unstarted_daemon

TOKEN = "s3cret-token"
NOT_READY = "loading: 0 of 3 logs"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    daemon = unstarted_daemon(tmp_path)
    settings = ApiSettings(auth_token=TOKEN, max_records_per_request=3)
    app = create_app(daemon.view, daemon.metrics_registry, settings=settings, not_ready=lambda: NOT_READY)
    with running(ApiServer(app, host="127.0.0.1", port=0)) as client:
        yield client


def test_every_router_is_mounted_and_the_settings_reach_the_document(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    prefixes = {"/".join(path.split("/")[:3]) for path in document["paths"]}

    assert prefixes >= {
        "/healthz",
        "/readyz",
        "/metrics",
        "/v1/topics",
        "/v1/checkpoints",
        "/v1/retention",
        "/v1/explain",
        "/v1/cleaner",
        "/v1/scheduler",
        "/v1/logs",
    }
    produce = document["components"]["schemas"]["ProduceRequest"]["properties"]["records"]
    assert produce["maxItems"] == 3  # api.max.records.per.request, as create_app was given it
    assert client.get("/healthz").json() == {"status": "ok"}  # open, and answers before the logs load


def test_the_guards_run_host_first_then_the_token_then_the_body_then_readiness(client: httpx.Client) -> None:
    text = {"content-type": "text/plain"}
    bearer = {"authorization": f"Bearer {TOKEN}"}

    assert_problem(client.post("/v1/topics", content=b"x", headers={**text, "host": "evil.example"}), 421)
    assert_problem(client.post("/v1/topics", content=b"x", headers=text), 401)
    assert_problem(client.post("/v1/topics", content=b"x", headers={**text, **bearer}), 415)
    body = assert_problem(client.post("/v1/topics", json={"name": "t"}, headers=bearer), 503)
    assert body["detail"] == NOT_READY
    assert_problem(client.get("/readyz"), 503)

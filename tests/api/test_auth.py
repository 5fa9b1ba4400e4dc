"""Bearer-token authentication: every /v1 call needs the token; health, readiness and metrics stay open."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.config.broker_config import BrokerConfig
from service.config.definitions import InvalidConfigError
from service.shell.daemon import Daemon
from tests.api.conftest import QUIET_DAEMON, Served, assert_problem, disk_snapshot, serve_daemon

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("guarded")
    token_file = base / "token"
    token_file.write_text(f"  {TOKEN}\n\n", encoding="utf-8")  # surrounding whitespace is ignored
    overrides = {"api.auth.token.file": str(token_file), "log.cleaner.enable": "false"}
    with serve_daemon(base / "logs", overrides) as served:
        yield served


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_v1_needs_the_token(guarded: Served) -> None:
    client = guarded.client
    body = assert_problem(client.get("/v1/topics"), 401)
    assert "Bearer" in str(body["detail"])
    assert client.get("/v1/topics").headers["www-authenticate"] == 'Bearer realm="logcleaner"'
    wrong = client.get("/v1/topics", headers=bearer("s3cret"))
    assert_problem(wrong, 401)
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    for header in ("Basic czNjcmV0", "Bearer", f"Bearer {TOKEN}x", TOKEN, f"Token {TOKEN}"):
        assert_problem(client.get("/v1/topics", headers={"Authorization": header}), 401)
    assert client.get("/v1/topics", headers=bearer(TOKEN)).status_code == 200
    assert client.get("/v1/topics", headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200


def test_an_unauthenticated_request_changes_nothing_and_learns_nothing(guarded: Served) -> None:
    before = disk_snapshot(guarded.log_dir)
    assert_problem(guarded.client.post("/v1/topics", json={"name": "sneaky"}), 401)
    assert_problem(guarded.client.post("/v1/topics", content=b"{malformed"), 401)  # not a 422
    assert_problem(guarded.client.delete("/v1/topics/anything"), 401)
    assert_problem(guarded.client.get("/v1/no-such-route"), 401)
    assert disk_snapshot(guarded.log_dir) == before


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics", "/openapi.json", "/docs"])
def test_health_metrics_and_docs_stay_open(guarded: Served, path: str) -> None:
    assert guarded.client.get(path).status_code == 200


def test_the_document_says_v1_needs_the_token(guarded: Served) -> None:
    document = guarded.client.get("/openapi.json").json()
    assert document["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    topics = document["paths"]["/v1/topics"]["get"]
    assert topics["security"] == [{"bearer": []}] and "401" in topics["responses"]
    assert "security" not in document["paths"]["/healthz"]["get"]


def test_without_a_cleaner_the_cleaner_routes_are_409(guarded: Served) -> None:
    auth = bearer(TOKEN)
    guarded.client.post(
        "/v1/topics", json={"name": "c", "configs": {"cleanup.policy": "compact"}}, headers=auth
    )
    body = assert_problem(guarded.client.get("/v1/cleaner", headers=auth), 409)
    assert "log.cleaner.enable" in str(body["detail"])
    run = guarded.client.post("/v1/cleaner/run", json={"topic": "c", "partition": 0}, headers=auth)
    assert_problem(run, 409)


@pytest.mark.parametrize("content", ["", "  \n", None], ids=["empty", "blank", "missing"])
def test_an_unusable_token_file_stops_start_up(tmp_path: Path, content: str | None) -> None:
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_text(content)
    broker, _ = BrokerConfig.from_properties(
        {"log.dirs": str(tmp_path / "logs"), **QUIET_DAEMON, "api.auth.token.file": str(token_file)}
    )
    daemon = Daemon(broker)
    with pytest.raises(InvalidConfigError, match=r"api\.auth\.token\.file"):
        daemon.start()  # before anything: no log dir is even created
    assert not (tmp_path / "logs").exists()


def test_without_a_token_file_v1_is_open(served: Served) -> None:
    assert served.client.get("/v1/topics").status_code == 200
    assert (
        httpx.get(f"http://127.0.0.1:{served.port}/v1/topics", headers=bearer("anything")).status_code == 200
    )

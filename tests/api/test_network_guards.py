"""The network defaults of ``api.network_guards`` on a real server: no cross-site ``Origin`` (403), and
``Host`` checked against the bound address and ``api.allowed.hosts`` (421, DNS rebinding). (JSON bodies
only, 415, is ``api.guards``': ``test_guards.py``.)"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from starlette.types import Receive, Scope, Send

from api.network_guards import HostGuard
from service.storage.topic_partition import TopicPartition
from tests.api.conftest import Served, assert_problem, disk_snapshot, serve_daemon, string_record

RECORDS = json.dumps({"records": [string_record("k", "v")]})


def records_path(topic: str) -> str:
    return f"/v1/topics/{topic}/partitions/0/records"


def end_offset(served: Served, topic: str) -> int:
    return served.daemon.log_manager.get_log(TopicPartition(topic, 0)).log_end_offset


# -- Origin ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1", "file://", "x"])
def test_a_cross_site_text_plain_post_neither_produces_nor_runs_retention(
    served: Served, topic: str, origin: str
) -> None:
    """The probe's browser form: text/plain from another page, to produce and to run retention."""
    # Two one-batch segments, the first far past retention: a retention pass would delete it.
    served.client.patch(
        f"/v1/topics/{topic}/configs", json={"set": {"retention.ms": 1, "segment.bytes": 100}}
    )
    for timestamp in (1, 2):
        record = string_record("k", "v", timestamp=timestamp)
        produced = served.client.post(records_path(topic), json={"records": [record]})
        assert produced.status_code == 200, produced.text
    before = disk_snapshot(served.log_dir)
    headers = {"origin": origin, "content-type": "text/plain"}
    assert_problem(served.client.post(records_path(topic), content=RECORDS, headers=headers), 403)
    assert_problem(served.client.post("/v1/retention/run", content="x", headers=headers), 403)
    json_from_elsewhere = served.client.post("/v1/retention/run", headers={"origin": origin})
    body = assert_problem(json_from_elsewhere, 403)
    assert "api.allowed.origins" in str(body["detail"])
    assert_problem(served.client.get("/v1/topics", headers={"origin": origin}), 403)
    assert end_offset(served, topic) == 2
    assert disk_snapshot(served.log_dir) == before


def test_the_servers_own_origin_and_no_origin_are_accepted(served: Served, topic: str) -> None:
    own = f"http://127.0.0.1:{served.port}"
    assert (
        served.client.post(
            records_path(topic), content=RECORDS, headers={"origin": own, "content-type": "application/json"}
        ).status_code
        == 200
    )
    assert served.client.get("/v1/topics", headers={"origin": own.upper()}).status_code == 200
    assert served.client.get("/metrics").status_code == 200  # no Origin: Prometheus, curl


# -- Host -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/topics", "/healthz", "/readyz", "/metrics", "/openapi.json"])
@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "127.0.0.1.nip.io", "localhost.evil"])
def test_a_foreign_host_is_421_on_every_path(served: Served, path: str, host: str) -> None:
    body = assert_problem(served.client.get(path, headers={"host": host}), 421)
    assert "api.allowed.hosts" in str(body["detail"])


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "LOCALHOST:9", "[::1]:8080", "127.0.0.2", "localhost."]
)
def test_the_bound_address_and_loopback_names_are_accepted(served: Served, host: str) -> None:
    assert served.client.get("/v1/topics", headers={"host": host}).status_code == 200


def test_a_rebound_name_cannot_produce(served: Served, topic: str) -> None:
    before = disk_snapshot(served.log_dir)
    headers = {"host": f"attacker.example:{served.port}", "origin": f"http://attacker.example:{served.port}"}
    response = served.client.post(records_path(topic), content=RECORDS, headers=headers)
    assert_problem(response, 421)
    assert disk_snapshot(served.log_dir) == before


@pytest.fixture(scope="module")
def configured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    overrides = {
        "api.allowed.hosts": "logcleaner, Logs.Example.",
        "api.allowed.origins": "https://ui.example, http://127.0.0.1:3000",
    }
    with serve_daemon(tmp_path_factory.mktemp("configured"), overrides) as served:
        yield served


def test_listed_hosts_and_origins_are_accepted(configured: Served) -> None:
    client = configured.client
    for host in ("logcleaner:8080", "logs.example", "LOGS.EXAMPLE:443"):
        assert client.get("/metrics", headers={"host": host}).status_code == 200, host
    assert_problem(client.get("/metrics", headers={"host": "other.example"}), 421)
    for origin in ("https://ui.example", "https://UI.example:443", "http://127.0.0.1:3000"):
        assert client.get("/v1/topics", headers={"origin": origin}).status_code == 200, origin
    for origin in ("http://ui.example", "https://ui.example:8443", "http://127.0.0.1:3001"):
        assert_problem(client.get("/v1/topics", headers={"origin": origin}), 403)
    # Behind a TLS proxy that keeps the name: the page's https origin is the server's own.
    behind_a_tls_proxy = {"origin": "https://logs.example", "host": "logs.example"}
    assert client.post("/v1/retention/run?dry_run=true", headers=behind_a_tls_proxy).status_code == 200
    assert_problem(
        client.get("/v1/topics", headers={**behind_a_tls_proxy, "origin": "https://ui2.example"}), 403
    )


def test_a_wildcard_bind_accepts_addresses_but_not_unlisted_names() -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:  # never reached here
        raise AssertionError

    wildcard = HostGuard(app, bound_host="0.0.0.0", allowed_hosts=["logcleaner"])
    assert wildcard.is_allowed("10.1.2.3:8080") and wildcard.is_allowed("[fd00::1]:8080")
    assert wildcard.is_allowed("logcleaner:8080") and not wildcard.is_allowed("evil.example")
    specific = HostGuard(app, bound_host="10.1.2.3", allowed_hosts=[])
    assert specific.is_allowed("10.1.2.3:8080") and not specific.is_allowed("10.9.9.9")
    anything = HostGuard(app, bound_host="127.0.0.1", allowed_hosts=["*"])
    assert anything.is_allowed("evil.example")

"""HEAD is GET without the body on every GET route, over real HTTP: the same status and headers, no
content; methods a path does not have are still 405."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.api.conftest import Served, serve_daemon, string_record

NO_BODY_HEADERS = ("date", "content-length")  # the date moves; the length is checked on its own


def _filled(path: str, topic: str) -> str:
    return (
        path.replace("{topic}", topic)
        .replace("{partition}", "0")
        .replace("{name}", "recovery-point-offset-checkpoint")
    )


def test_head_metrics_is_get_without_the_body(served: Served) -> None:
    head = served.client.head("/metrics")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == served.client.get("/metrics").headers["content-type"]
    assert int(head.headers["content-length"]) > 1000
    openmetrics = served.client.head("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")


def test_every_get_route_answers_head_as_get(served: Served, topic: str) -> None:
    served.client.post(
        f"/v1/topics/{topic}/partitions/0/records", json={"records": [string_record("k", "v")]}
    )
    document = served.client.get("/openapi.json").json()
    get_paths = [path for path, operations in document["paths"].items() if "get" in operations]
    assert {"/metrics", "/healthz", "/v1/topics", "/v1/topics/{topic}/partitions/{partition}"} <= set(
        get_paths
    )
    for path in [*get_paths, "/openapi.json", "/docs", "/v1/topics/no-such-topic"]:
        url = _filled(path, topic)
        for _ in range(5):  # a status document (task timings, loads) may change between the two requests
            get, head = served.client.get(url), served.client.head(url)
            if head.headers.get("content-length") == get.headers.get("content-length"):
                break
        assert head.status_code == get.status_code != 405, url
        assert head.content == b"", url
        assert {k: v for k, v in head.headers.items() if k not in NO_BODY_HEADERS} == {
            k: v for k, v in get.headers.items() if k not in NO_BODY_HEADERS
        }, url
        if path != "/metrics":  # a scrape's length moves between two requests
            assert int(head.headers["content-length"]) == len(get.content), url


@pytest.mark.parametrize("path", ["/v1/retention/run", "/v1/cleaner/run"])
def test_head_of_a_path_without_get_is_still_405(served: Served, path: str) -> None:
    answer = served.client.head(path)
    assert answer.status_code == 405 and answer.content == b""
    assert "POST" in answer.headers["allow"]


def test_head_needs_the_token_where_get_does(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("t0ken\n", encoding="utf-8")
    with serve_daemon(tmp_path / "logs", {"api.auth.token.file": str(token_file)}) as guarded:
        refused = guarded.client.head("/v1/topics")
        assert refused.status_code == 401 and refused.content == b""
        assert refused.headers["www-authenticate"] == 'Bearer realm="logcleaner"'
        assert guarded.client.head("/v1/topics", headers={"Authorization": "Bearer t0ken"}).status_code == 200
        assert guarded.client.head("/metrics").status_code == 200, "open, as GET is"

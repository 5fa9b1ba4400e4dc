"""The request guards in front of routing (``api.guards``), on a real server: every body the API reads is
declared JSON (415 otherwise, nothing appended), and a body over ``api.max.request.bytes`` is a 413 naming
the limit, refused before it is read whether declared or chunked. (An encoded ``/`` in a topic segment is
among the invalid names of ``routes/test_topics.py``; ``Host``, ``Origin``: ``test_network_guards.py``.)"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from service.storage.topic_partition import TopicPartition
from tests.api.conftest import Served, assert_problem, disk_snapshot, serve_daemon, string_record

RECORDS = json.dumps({"records": [string_record("k", "v")]})


def records_path(topic: str) -> str:
    return f"/v1/topics/{topic}/partitions/0/records"


def end_offset(served: Served, topic: str) -> int:
    return served.daemon.log_manager.get_log(TopicPartition(topic, 0)).log_end_offset


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve_daemon(tmp_path_factory.mktemp("limited"), {"api.max.request.bytes": "4096"}) as served:
        assert served.client.post("/v1/topics", json={"name": "t"}).status_code == 201
        yield served


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
        "application/json; charset=latin-1",
        "",
    ],
    ids=repr,
)
def test_a_body_that_is_not_declared_json_is_415_and_appends_nothing(
    served: Served, topic: str, content_type: str
) -> None:
    before = disk_snapshot(served.log_dir)
    response = served.client.post(
        records_path(topic), content=RECORDS, headers={"content-type": content_type}
    )
    body = assert_problem(response, 415)
    assert "application/json" in str(body["detail"]) and body["expected"] == "application/json"
    assert response.headers["accept-post"] == "application/json"
    assert end_offset(served, topic) == 0
    assert disk_snapshot(served.log_dir) == before


def test_a_body_without_a_content_type_is_415(served: Served, topic: str) -> None:
    request = served.client.build_request("POST", records_path(topic), content=RECORDS)
    assert "content-type" not in request.headers
    body = assert_problem(served.client.send(request), 415)
    assert "no Content-Type" in str(body["detail"])
    patch = served.client.build_request("PATCH", f"/v1/topics/{topic}/configs", content=b'{"set": {}}')
    response = served.client.send(patch)
    assert_problem(response, 415)
    assert response.headers["accept-patch"] == "application/json"
    assert end_offset(served, topic) == 0


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON;Charset=UTF8"]
)
def test_json_with_or_without_a_utf8_charset_is_taken(served: Served, topic: str, content_type: str) -> None:
    response = served.client.post(
        records_path(topic), content=RECORDS, headers={"content-type": content_type}
    )
    assert response.status_code == 200, response.text
    assert end_offset(served, topic) == 1


def test_a_post_without_a_body_needs_no_content_type(served: Served) -> None:
    request = served.client.build_request("POST", "/v1/retention/run?dry_run=true")
    assert "content-type" not in request.headers
    assert served.client.send(request).status_code == 200
    form = served.client.post(
        "/v1/retention/run", headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert_problem(form, 415)


def test_the_document_says_bodies_may_be_415(served: Served) -> None:
    paths = served.client.get("/openapi.json").json()["paths"]
    assert "415" in paths["/v1/topics"]["post"]["responses"]
    assert "415" in paths["/v1/topics/{topic}/configs"]["patch"]["responses"]
    assert "415" not in paths["/v1/topics"]["get"]["responses"]


def test_a_body_over_the_limit_is_413_before_it_is_read(limited: Served) -> None:
    before = disk_snapshot(limited.log_dir)
    records = [string_record("k", "x" * 2000)] * 3
    body = assert_problem(limited.client.post(records_path("t"), json={"records": records}), 413)
    assert "4096" in str(body["detail"]) and "api.max.request.bytes" in str(body["detail"])

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"records": ['
        for _ in range(100):
            yield json.dumps(string_record("k", "x" * 100)).encode() + b","
        yield b"{}]}"

    chunked = limited.client.post(
        records_path("t"), content=chunks(), headers={"content-type": "application/json"}
    )
    body = assert_problem(chunked, 413)
    assert "4096" in str(body["detail"])
    assert disk_snapshot(limited.log_dir) == before

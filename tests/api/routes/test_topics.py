"""Topics and their configs over HTTP: create, list, describe, delete, overrides applied live."""

from __future__ import annotations

import http.client
import json

import pytest

from service.storage.topic_partition import TopicPartition
from tests.api.conftest import Served, assert_problem, disk_snapshot, unique_topic_name


def test_create_list_describe_and_delete_a_topic(served: Served) -> None:
    name = unique_topic_name("orders")
    created = served.client.post(
        "/v1/topics", json={"name": name, "partitions": 3, "configs": {"retention.ms": 60000}}
    )
    assert created.status_code == 201, created.text
    assert created.headers["location"] == f"/v1/topics/{name}"
    detail = created.json()
    assert [p["partition"] for p in detail["partitions"]] == [0, 1, 2]
    assert isinstance(detail["topic_id"], str) and len(detail["topic_id"]) == 22  # Kafka's base64 id
    assert detail["configs"] == {"retention.ms": 60000}
    assert (served.log_dir / f"{name}-2").is_dir()
    log = served.daemon.log_manager.get_log(TopicPartition(name, 0))
    assert log.config.retention_ms == 60000, "the logs are created with the overrides"

    listed = served.client.get("/v1/topics").json()["topics"]
    assert {"name": name, "partitions": 3} in listed
    assert served.client.get(f"/v1/topics/{name}").json() == detail

    deleted = served.client.delete(f"/v1/topics/{name}")
    assert deleted.status_code == 202
    assert deleted.json() == {"name": name, "partitions": [0, 1, 2]}
    assert not (served.log_dir / f"{name}-0").exists()
    assert any(p.name.endswith("-delete") and p.name.startswith(name) for p in served.log_dir.iterdir())
    assert_problem(served.client.get(f"/v1/topics/{name}"), 404)
    assert served.daemon.topic_store.get(name) == {}, "Kafka deletes the topic's configs with it"


def test_partitions_default_to_num_partitions_and_can_grow(served: Served) -> None:
    name = unique_topic_name("grow")
    assert served.client.post("/v1/topics", json={"name": name}).json()["partitions"][0]["partition"] == 0
    topic_id = served.client.get(f"/v1/topics/{name}").json()["topic_id"]
    grown = served.client.post(f"/v1/topics/{name}/partitions", json={"count": 3})
    assert grown.status_code == 200, grown.text
    assert len(grown.json()["partitions"]) == 3
    assert grown.json()["topic_id"] == topic_id, "added partitions get the topic's id"
    for p in range(3):
        metadata = (served.log_dir / f"{name}-{p}" / "partition.metadata").read_text()
        assert metadata == f"version: 0\ntopic_id: {topic_id}"
    assert_problem(served.client.post(f"/v1/topics/{name}/partitions", json={"count": 2}), 422)


def test_an_existing_topic_is_a_conflict_and_keeps_its_configs(served: Served, topic: str) -> None:
    before = disk_snapshot(served.log_dir)
    response = served.client.post(
        "/v1/topics", json={"name": topic, "partitions": 1, "configs": {"retention.ms": 5}}
    )
    body = assert_problem(response, 409)
    assert topic in str(body["detail"])
    assert served.daemon.topic_store.get(topic) == {}
    assert disk_snapshot(served.log_dir) == before


@pytest.mark.parametrize("name", [".", "..", "", "a/b", "a\\b", "ü", "a b", "x" * 250, "../../etc"], ids=repr)
def test_invalid_topic_names_in_a_body_are_422_and_change_nothing(served: Served, name: str) -> None:
    before = disk_snapshot(served.log_dir)
    assert_problem(served.client.post("/v1/topics", json={"name": name}), 422, field="name")
    assert disk_snapshot(served.log_dir) == before


@pytest.mark.parametrize(
    "raw_path",
    [
        "/v1/topics/%2E%2E",
        "/v1/topics/%2e",
        "/v1/topics/..",
        "/v1/topics/a%2Fb",
        "/v1/topics/a%2fb/configs",
        "/v1/topics/..%2F..%2Fetc/configs",
        "/v1/topics/a%5Cb",
        "/v1/topics/%C3%BC",
        "/v1/topics/a%20b",
    ],
)
def test_invalid_topic_names_in_a_path_are_422(served: Served, raw_path: str) -> None:
    before = disk_snapshot(served.log_dir)
    for method in ("GET", "DELETE"):
        # http.client sends the target as written (httpx would resolve "..").
        connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
        try:
            connection.request(method, raw_path)
            answer = connection.getresponse()
            status, content_type, body = answer.status, answer.getheader("content-type"), answer.read()
        finally:
            connection.close()
        assert (status, content_type) == (422, "application/problem+json"), body
        assert any(e["field"] == "topic" for e in json.loads(body)["errors"])
    assert disk_snapshot(served.log_dir) == before


def test_unknown_topics_and_partitions_are_404(served: Served, topic: str) -> None:
    assert_problem(served.client.get("/v1/topics/nope-never-created"), 404)
    assert_problem(served.client.delete("/v1/topics/nope-never-created"), 404)
    assert_problem(served.client.get("/v1/topics/nope-never-created/configs"), 404)
    assert_problem(served.client.patch("/v1/topics/nope-never-created/configs", json={"set": {}}), 404)
    body = assert_problem(served.client.get(f"/v1/topics/{topic}/partitions/7"), 404)
    assert "partition 7" in str(body["detail"])
    assert_problem(served.client.get(f"/v1/topics/{topic}/partitions/-1"), 422, field="partition")
    assert_problem(served.client.get(f"/v1/topics/{topic}/partitions/x"), 422, field="partition")
    # Strict: a partition is written in decimal digits; none of these is coerced to 0 or 1.
    for raw in ("1.0", "%201", "1%20", "+1", "01", "00", "1e0", "0x1", "%EF%BC%91", "9" * 20):
        response = served.client.get(f"/v1/topics/{topic}/partitions/{raw}")
        assert_problem(response, 422, field="partition")
        assert_problem(
            served.client.get(f"/v1/topics/{topic}/partitions/{raw}/records"), 422, field="partition"
        )


def test_configs_show_their_source_and_change_live(served: Served, topic: str) -> None:
    configs = {c["name"]: c for c in served.client.get(f"/v1/topics/{topic}/configs").json()["configs"]}
    assert configs["retention.ms"] == {"name": "retention.ms", "value": 604800000, "source": "default"}
    assert configs["cleanup.policy"]["value"] == "delete"

    patched = served.client.patch(
        f"/v1/topics/{topic}/configs",
        json={"set": {"retention.ms": 1000, "cleanup.policy": "compact,delete", "segment.bytes": "2048"}},
    )
    assert patched.status_code == 200, patched.text
    after = {c["name"]: c for c in patched.json()["configs"]}
    assert after["retention.ms"] == {"name": "retention.ms", "value": 1000, "source": "override"}
    assert after["segment.bytes"]["value"] == 2048
    log = served.daemon.log_manager.get_log(TopicPartition(topic, 0))
    assert log.config.retention_ms == 1000 and log.config.segment_bytes == 2048 and log.config.is_compacted

    served.client.patch(f"/v1/topics/{topic}/configs", json={"delete": ["cleanup.policy", "segment.bytes"]})
    assert not log.config.is_compacted and log.config.segment_bytes == 1_073_741_824
    assert served.daemon.topic_store.get(topic) == {"retention.ms": "1000"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"set": {"retention.mss": 5}}, "set.retention.mss"),
        ({"set": {"retention.ms": "soon"}}, "set.retention.ms"),
        ({"set": {"retention.ms": -2}}, "set.retention.ms"),
        ({"set": {"retention.ms": 1.5}}, "set.retention.ms"),
        ({"set": {"cleanup.policy": "shred"}}, "set.cleanup.policy"),
        ({"set": {"min.cleanable.dirty.ratio": 2}}, "set.min.cleanable.dirty.ratio"),
        ({"set": {"retention.ms": None}}, "set.retention.ms"),
        ({"set": {"retention.ms": [1]}}, "set.retention.ms"),
        ({"delete": ["nope.ms"]}, "delete[0]"),
        ({"set": {"retention.ms": 5}, "delete": ["retention.ms"]}, "delete[0]"),
        ({"sett": {}}, "sett"),
        ({"set": []}, "set"),
        ({"set": {"retention.ms": "1" * 4301}}, "set.retention.ms"),  # was a 500
        ({"set": {"retention.ms": 1 << 63}}, "set.retention.ms"),
        ({"set": {"segment.bytes": "2147483648"}}, "set.segment.bytes"),
        ({"set": {"min.cleanable.dirty.ratio": 10**400}}, "set.min.cleanable.dirty.ratio"),
    ],
    ids=lambda v: v if isinstance(v, str) else json.dumps(v)[:50],
)
def test_invalid_config_changes_are_422_naming_the_field(
    served: Served, topic: str, body: dict[str, object], field: str
) -> None:
    before = disk_snapshot(served.log_dir)
    assert_problem(served.client.patch(f"/v1/topics/{topic}/configs", json=body), 422, field=field)
    assert served.daemon.topic_store.get(topic) == {}
    assert disk_snapshot(served.log_dir) == before


def test_invalid_create_bodies_are_422(served: Served) -> None:
    name = unique_topic_name("bad")
    before = disk_snapshot(served.log_dir)
    cases: list[tuple[object, str]] = [
        ({"name": name, "partitions": 0}, "partitions"),
        ({"name": name, "partitions": "two"}, "partitions"),
        ({"name": name, "partitions": 1001}, "partitions"),
        ({"name": name, "partitions": "2"}, "partitions"),  # strict: no string, boolean or float is 2
        ({"name": name, "partitions": True}, "partitions"),
        ({"name": name, "partitions": 2.0}, "partitions"),
        ({"name": name, "configs": {"retention.ms": "1" * 4301}}, "configs.retention.ms"),
        ({"name": name, "configs": {"segment.bytes": 1 << 31}}, "configs.segment.bytes"),
        (
            {"name": name, "configs": {"min.cleanable.dirty.ratio": 10**400}},
            "configs.min.cleanable.dirty.ratio",
        ),
        ({"name": name, "configs": {"segment.bytes": 13}}, "configs.segment.bytes"),
        ({"name": name, "configs": {"bogus": "1"}}, "configs.bogus"),
        ({"partitions": 1}, "name"),
        ({"name": 5}, "name"),
        ([name], "body"),
    ]
    for body, field in cases:
        assert_problem(served.client.post("/v1/topics", json=body), 422, field=field)
    truncated = served.client.post(
        "/v1/topics", content=b'{"name": ', headers={"content-type": "application/json"}
    )
    assert_problem(truncated, 422, field="body")
    assert disk_snapshot(served.log_dir) == before


def test_a_config_change_over_rest_is_one_audit_line_per_key(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique_topic_name("audited")
    served.client.post("/v1/topics", json={"name": topic})
    with caplog.at_level("INFO", logger="logcleaner.audit"):
        caplog.clear()  # the creation's line too, if an earlier test left the audit logger at INFO
        changes = {"set": {"retention.ms": 86_400_000, "cleanup.policy": "compact,delete"}}
        assert served.client.patch(f"/v1/topics/{topic}/configs", json=changes).status_code == 200
    lines = [
        r.getMessage() for r in caplog.records if r.name == "logcleaner.audit" and topic in r.getMessage()
    ]
    assert sorted(lines) == [
        f"Topic config changed: {topic} cleanup.policy delete [default] -> compact,delete [override]",
        f"Topic config changed: {topic} retention.ms 604800000 [default] -> 86400000 [override]",
    ]

"""Produce and fetch over HTTP: record JSON, all-or-nothing appends, Kafka's fetch semantics, limits."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.storage.records import Header, Record
from service.storage.topic_partition import TopicPartition
from tests.api.conftest import (
    Served,
    assert_problem,
    disk_snapshot,
    serve_daemon,
    string_record,
    unique_topic_name,
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def records_path(topic: str, partition: int = 0) -> str:
    return f"/v1/topics/{topic}/partitions/{partition}/records"


def test_produce_then_fetch_every_data_type(served: Served, topic: str) -> None:
    records = [
        {
            "key": {"type": "STRING", "data": "user-ü"},
            "value": {"type": "JSON", "data": {"n": 1, "tags": ["a"]}},
            "timestamp": 1_700_000_000_000,
            "headers": [{"key": "trace", "value": {"type": "BINARY", "data": b64(b"\x00\xff")}}],
        },
        {"key": {"type": "BINARY", "data": b64(b"\x01\x02")}, "value": None},  # a tombstone
        {"value": {"type": "STRING", "data": ""}, "headers": [{"key": "empty", "value": None}]},
    ]
    produced = served.client.post(records_path(topic), json={"records": records})
    assert produced.status_code == 200, produced.text
    assert produced.json() == {
        "topic": topic,
        "partition": 0,
        "base_offset": 0,
        "last_offset": 2,
        "offsets": [0, 1, 2],
        "log_append_time": None,
    }
    log = served.daemon.log_manager.get_log(TopicPartition(topic, 0))
    stored = log.read(0, 10)
    assert stored[0] == Record(
        0, 1_700_000_000_000, "user-ü".encode(), b'{"n":1,"tags":["a"]}', (Header("trace", b"\x00\xff"),)
    )
    assert stored[1].key == b"\x01\x02" and stored[1].value is None
    assert stored[2].key is None and stored[2].value == b"" and stored[2].headers == (Header("empty", None),)
    now = served.daemon.clock.now_ms()
    assert now - 60_000 < stored[2].timestamp <= now, "no timestamp: the producer's now"

    fetched = served.client.get(records_path(topic), params={"offset": 0}).json()
    assert fetched["log_start_offset"] == 0 and fetched["log_end_offset"] == 3 and fetched["next_offset"] == 3
    first = fetched["records"][0]
    assert first == {
        "offset": 0,
        "timestamp": 1_700_000_000_000,
        "key": {"type": "BINARY", "data": b64("user-ü".encode())},
        "value": {"type": "BINARY", "data": b64(b'{"n":1,"tags":["a"]}')},
        "headers": [{"key": "trace", "value": {"type": "BINARY", "data": b64(b"\x00\xff")}}],
    }
    assert fetched["records"][1]["value"] is None
    assert fetched["records"][2]["headers"] == [{"key": "empty", "value": None}]


def test_fetch_ranges_follow_kafka(served: Served, topic: str) -> None:
    for i in range(5):
        served.client.post(records_path(topic), json={"records": [string_record(f"k{i}", f"v{i}")]})
    page = served.client.get(records_path(topic), params={"offset": 1, "max_records": 2}).json()
    assert [r["offset"] for r in page["records"]] == [1, 2] and page["next_offset"] == 3
    default = served.client.get(records_path(topic)).json()
    assert [r["offset"] for r in default["records"]] == [0, 1, 2, 3, 4], "no offset: from the log start"
    at_end = served.client.get(records_path(topic), params={"offset": 5}).json()
    assert at_end["records"] == [] and at_end["next_offset"] == 5

    body = assert_problem(served.client.get(records_path(topic), params={"offset": 6}), 416)
    assert "[0, 5]" in str(body["detail"]) and (body["log_start_offset"], body["log_end_offset"]) == (0, 5)

    moved = served.client.post(f"/v1/topics/{topic}/partitions/0/delete-records", json={"before_offset": 3})
    assert moved.status_code == 200 and moved.json()["log_start_offset"] == 3
    body = assert_problem(served.client.get(records_path(topic), params={"offset": 2}), 416)
    assert "[3, 5]" in str(body["detail"])
    assert [r["offset"] for r in served.client.get(records_path(topic)).json()["records"]] == [3, 4]

    cases: list[tuple[dict[str, int | str], str]] = [
        ({"offset": -1}, "offset"),
        ({"offset": "x"}, "offset"),
        ({"max_records": 0}, "max_records"),
        ({"max_records": 10_001}, "max_records"),
    ]
    for params, field in cases:
        assert_problem(served.client.get(records_path(topic), params=params), 422, field=field)
    assert_problem(served.client.get(records_path(topic, 3)), 404)
    assert_problem(served.client.get(records_path("never-created")), 404)


def test_a_compacted_away_offset_fetches_the_next_record(served: Served) -> None:
    topic = unique_topic_name("compacted")
    configs = {"cleanup.policy": "compact", "segment.bytes": 300, "min.cleanable.dirty.ratio": 0.01}
    assert served.client.post("/v1/topics", json={"name": topic, "configs": configs}).status_code == 201
    for round_no in range(3):
        for key in ("a", "b", "c"):
            response = served.client.post(
                records_path(topic), json={"records": [string_record(key, f"{key}{round_no}")]}
            )
            assert response.status_code == 200, response.text
    cleaned = served.client.post("/v1/cleaner/run", json={"topic": topic, "partition": 0})
    assert cleaned.status_code == 200, cleaned.text
    (entry,) = cleaned.json()["cleaned"]
    assert entry["topic"] == topic and entry["partition"] == 0 and entry["end_offset"] > 0

    fetched = served.client.get(records_path(topic), params={"offset": 0}).json()
    offsets = [r["offset"] for r in fetched["records"]]
    assert offsets[0] > 0, "offset 0 (a0, superseded) was compacted away: the next record comes"
    values = {base64.b64decode(r["value"]["data"]).decode() for r in fetched["records"]}
    assert {"a2", "b2", "c2"} <= values and "a0" not in values


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"key": {"type": "BINARY", "data": "not base64!"}}, "records[2].key.data"),
        ({"value": {"type": "BINARY", "data": 5}}, "records[2].value.data"),
        ({"value": {"type": "TEXT", "data": "x"}}, "records[2].value"),
        ({"value": {"type": "STRING", "data": "\ud800"}}, "body"),  # JSON with a lone surrogate
        ({"value": {"type": "STRING"}}, "records[2].value.data"),
        ({"value": "plain"}, "records[2].value"),
        ({"timestamp": -5}, "records[2].timestamp"),
        ({"timestamp": "now"}, "records[2].timestamp"),
        ({"timestamp": "10"}, "records[2].timestamp"),  # strict: not coerced
        ({"timestamp": 10.0}, "records[2].timestamp"),
        ({"headers": [{"value": None}]}, "records[2].headers[0].key"),
        ({"headers": {"k": "v"}}, "records[2].headers"),
        ({"offset": 7}, "records[2].offset"),
    ],
    ids=lambda v: v if isinstance(v, str) else json.dumps(v)[:40],
)
def test_one_bad_record_rejects_the_request_and_appends_nothing(
    served: Served, topic: str, bad: dict[str, object], field: str
) -> None:
    before = disk_snapshot(served.log_dir)
    records = [string_record("k", "v"), string_record("k", "v"), bad]
    content = json.dumps({"records": records})  # ASCII: escapes what httpx could not encode
    response = served.client.post(
        records_path(topic), content=content, headers={"content-type": "application/json"}
    )
    assert_problem(response, 422, field=field)
    assert disk_snapshot(served.log_dir) == before
    assert served.daemon.log_manager.get_log(TopicPartition(topic, 0)).log_end_offset == 0


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b"[]", b'{"records": []}', b'{"records": {}}', b'{"records": [1]}', b'{"recs": []}', b"\xff"],
    ids=repr,
)
def test_malformed_produce_bodies_are_422(served: Served, topic: str, body: bytes) -> None:
    before = disk_snapshot(served.log_dir)
    response = served.client.post(
        records_path(topic), content=body, headers={"content-type": "application/json"}
    )
    assert_problem(response, 422)
    assert disk_snapshot(served.log_dir) == before


def test_the_logs_own_rules_reject_the_whole_request(served: Served) -> None:
    """Keys on compacted topics and KIP-937 timestamp bounds are checked by the log, all or nothing."""
    topic = unique_topic_name("rules")
    configs = {"cleanup.policy": "compact", "message.timestamp.before.max.ms": 3_600_000}
    assert served.client.post("/v1/topics", json={"name": topic, "configs": configs}).status_code == 201
    before = disk_snapshot(served.log_dir)
    unkeyed = [string_record("k", "v"), string_record(None, "v")]
    body = assert_problem(
        served.client.post(records_path(topic), json={"records": unkeyed}), 422, field="records"
    )
    assert "key" in str(body["detail"])
    too_old = [string_record("k", "v"), string_record("k", "v", timestamp=1000)]
    body = assert_problem(
        served.client.post(records_path(topic), json={"records": too_old}), 422, field="records"
    )
    assert "message.timestamp.before.max.ms" in str(body["detail"])
    assert disk_snapshot(served.log_dir) == before


def test_a_request_over_max_message_bytes_is_split_into_batches(served: Served) -> None:
    topic = unique_topic_name("split")
    assert (
        served.client.post(
            "/v1/topics", json={"name": topic, "configs": {"max.message.bytes": 2000}}
        ).status_code
        == 201
    )
    records = [string_record(f"k{i}", "x" * 300) for i in range(20)]
    produced = served.client.post(records_path(topic), json={"records": records})
    assert produced.status_code == 200, produced.text
    assert produced.json()["offsets"] == list(range(20))
    log = served.daemon.log_manager.get_log(TopicPartition(topic, 0))
    batches = list(log.read_batches(0))
    assert len(batches) > 1 and all(b.size_bytes <= 2000 for b in batches)
    big = [string_record("k", "x" * 5000)]
    assert_problem(served.client.post(records_path(topic), json={"records": big}), 422, field="records")


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    limits = {
        "api.max.request.bytes": "4096",
        "api.max.records.per.request": "5",
        "api.max.fetch.records": "10",
        "api.max.fetch.bytes": "100",
    }
    with serve_daemon(tmp_path_factory.mktemp("limited"), limits) as served:
        assert served.client.post("/v1/topics", json={"name": "t"}).status_code == 201
        yield served


def test_record_and_fetch_limits_name_their_key(limited: Served, tmp_path: Path) -> None:
    six = [string_record("k", "v")] * 6
    body = assert_problem(limited.client.post(records_path("t"), json={"records": six}), 422, field="records")
    assert "api.max.records.per.request=5" in str(body["detail"])
    body = assert_problem(
        limited.client.get(records_path("t"), params={"max_records": 11}), 422, field="max_records"
    )
    assert "api.max.fetch.records" in str(body["detail"])

    produced = limited.client.post(records_path("t"), json={"records": [string_record("k", "x" * 60)] * 5})
    assert produced.status_code == 200, produced.text
    first = produced.json()["base_offset"]
    page = limited.client.get(records_path("t"), params={"offset": first}).json()
    assert len(page["records"]) == 2 and page["next_offset"] == first + 2, "stops once 100 bytes are passed"

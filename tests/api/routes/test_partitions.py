"""``/v1/topics/{t}/partitions``: one partition's document, DeleteRecords and CreatePartitions over HTTP.

``GET /v1/topics/{t}/partitions/{p}`` stays right as the log changes: the core keeps each segment's record
count as it grows (each batch header read once), so after a produce, a roll, a retention pass and a cleaning
round the document must still say what the files hold, read afresh here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.storage.file_records import iter_file_batches
from service.storage.log_files import LOG_SUFFIX, base_offset_from_name
from service.storage.topic_partition import TopicPartition
from tests.api.conftest import (
    Served,
    assert_problem,
    disk_snapshot,
    produce_one_by_one,
    string_record,
    unique_topic_name,
)


def test_partition_detail_lists_segments_with_record_counts(served: Served) -> None:
    topic = unique_topic_name("detail")
    served.client.post("/v1/topics", json={"name": topic, "configs": {"segment.bytes": 200}})
    produce_one_by_one(served, topic, 7, timestamp=1_700_000_000_000)
    detail = served.client.get(f"/v1/topics/{topic}/partitions/0").json()
    assert detail["log_start_offset"] == 0 and detail["log_end_offset"] == 7 and detail["high_watermark"] == 7
    segments = detail["segments"]
    assert len(segments) > 1
    assert sum(s["record_count"] for s in segments) == 7
    assert sum(s["size_bytes"] for s in segments) == detail["size_bytes"]
    assert segments[0]["largest_timestamp"] == 1_700_000_000_000
    assert segments[0]["largest_timestamp_source"] == "record"
    assert detail["cleanup_policy"] == "delete" and detail["cleaner_checkpoint"] is None
    assert 0.0 <= detail["dirty_ratio"] <= 1.0


def test_delete_records_advances_the_log_start_offset(served: Served, topic: str) -> None:
    produce_one_by_one(served, topic, 4)
    path = f"/v1/topics/{topic}/partitions/0/delete-records"
    assert served.client.post(path, json={"before_offset": 2}).json() == {
        "topic": topic,
        "partition": 0,
        "log_start_offset": 2,
        "log_end_offset": 4,
    }
    assert served.client.post(path, json={"before_offset": 1}).json()["log_start_offset"] == 2, "never back"
    before = disk_snapshot(served.log_dir)
    body = assert_problem(served.client.post(path, json={"before_offset": 5}), 416)
    assert "[2, 4]" in str(body["detail"])
    for bad, field in [
        ({"before_offset": -2}, "before_offset"),
        ({}, "before_offset"),
        ({"before": 1}, "before"),
        ({"before_offset": "10"}, "before_offset"),  # strict: not coerced
        ({"before_offset": True}, "before_offset"),
        ({"before_offset": 1.0}, "before_offset"),
    ]:
        assert_problem(served.client.post(path, json=bad), 422, field=field)
    assert_problem(served.client.post(f"/v1/topics/{topic}/partitions/1/delete-records", json=bad), 422)
    assert_problem(
        served.client.post(f"/v1/topics/{topic}/partitions/1/delete-records", json={"before_offset": 1}), 404
    )
    assert disk_snapshot(served.log_dir) == before
    assert served.client.post(path, json={"before_offset": -1}).json()["log_start_offset"] == 4, "-1: the HW"
    assert served.daemon.log_manager.get_log(TopicPartition(topic, 0)).log_start_offset == 4


def test_delete_records_on_a_compact_only_topic_is_a_policy_violation(served: Served) -> None:
    """Kafka's ``Partition.deleteRecordsOnLeader``: no ``delete`` in ``cleanup.policy``, no DeleteRecords."""
    topic = unique_topic_name("compact-only")
    response = served.client.post(
        "/v1/topics", json={"name": topic, "configs": {"cleanup.policy": "compact"}}
    )
    assert response.status_code == 201, response.text
    produce_one_by_one(served, topic, 4)
    path = f"/v1/topics/{topic}/partitions/0/delete-records"
    before = disk_snapshot(served.log_dir)
    body = assert_problem(served.client.post(path, json={"before_offset": 2}), 409)
    assert body["error"] == "POLICY_VIOLATION" and body["cleanup_policy"] == "compact"
    assert "PolicyViolationException" in str(body["detail"]) and "cleanup.policy=compact" in str(
        body["detail"]
    )
    assert disk_snapshot(served.log_dir) == before
    assert served.client.get(f"/v1/topics/{topic}/partitions/0").json()["log_start_offset"] == 0

    configs = {"set": {"cleanup.policy": "compact,delete"}}
    assert served.client.patch(f"/v1/topics/{topic}/configs", json=configs).status_code == 200
    assert served.client.post(path, json={"before_offset": 2}).json()["log_start_offset"] == 2


@pytest.mark.parametrize("bad", ["0", True, 0.0, "00"], ids=repr)
def test_partition_numbers_in_bodies_are_strict(served: Served, topic: str, bad: object) -> None:
    before = disk_snapshot(served.log_dir)
    run = served.client.post("/v1/cleaner/run", json={"topic": topic, "partition": bad})
    assert_problem(run, 422, field="partition")
    grow = served.client.post(f"/v1/topics/{topic}/partitions", json={"count": bad})
    assert_problem(grow, 422, field="count")
    assert disk_snapshot(served.log_dir) == before


# -- the partition document as the log changes ---------------------------------------------------------

TIMESTAMP_MS = 1_700_000_000_000


Segment = tuple[int, int, int, int | None]  # base offset, bytes, records, largest record timestamp


def on_disk(partition_dir: Path) -> list[Segment]:
    """Each live segment's figures, read from its ``.log`` file (no record timestamp: None)."""
    out = []
    for path in sorted(partition_dir.glob(f"*{LOG_SUFFIX}"), key=lambda p: base_offset_from_name(p.name)):
        size = path.stat().st_size
        fd = os.open(path, os.O_RDONLY)
        try:
            batches = list(iter_file_batches(fd, 0, size, path=str(path)))
        finally:
            os.close(fd)
        count = sum(b.records_count for b in batches)
        largest = max((b.max_timestamp for b in batches), default=-1)
        out.append((base_offset_from_name(path.name), size, count, largest if largest >= 0 else None))
    return out


def documented(served: Served, topic: str) -> list[Segment]:
    """The segments as the document lists them (a largest timestamp taken from the mtime: None)."""
    response = served.client.get(f"/v1/topics/{topic}/partitions/0")
    assert response.status_code == 200, response.text
    detail = response.json()
    assert detail["size_bytes"] == sum(s["size_bytes"] for s in detail["segments"])
    return [
        (
            s["base_offset"],
            s["size_bytes"],
            s["record_count"],
            s["largest_timestamp"] if s["largest_timestamp_source"] == "record" else None,
        )
        for s in detail["segments"]
    ]


def produce(served: Served, topic: str, keys: list[str], *, at: int = TIMESTAMP_MS) -> None:
    records = [string_record(k, f"value-of-{k}", timestamp=at + i) for i, k in enumerate(keys)]
    response = served.client.post(f"/v1/topics/{topic}/partitions/0/records", json={"records": records})
    assert response.status_code == 200, response.text


def test_the_document_follows_produce_roll_retention_and_cleaning(served: Served) -> None:
    topic = unique_topic_name("document")
    configs = {"segment.bytes": 300, "retention.ms": -1}
    assert served.client.post("/v1/topics", json={"name": topic, "configs": configs}).status_code == 201
    partition_dir = served.log_dir / f"{topic}-0"

    produce(served, topic, ["k0"], at=TIMESTAMP_MS)
    [(base, one_batch, records, largest)] = documented(served, topic)
    assert (base, records, largest) == (0, 1, TIMESTAMP_MS)
    produce(served, topic, ["k1"], at=TIMESTAMP_MS + 10)  # into the segment counted by the GET before
    assert documented(served, topic) == on_disk(partition_dir) == [(0, 2 * one_batch, 2, TIMESTAMP_MS + 10)]
    for i in range(2, 6):  # one batch a request: the segments roll every few batches
        produce(served, topic, [f"k{i % 3}"], at=TIMESTAMP_MS + 10 * i)
    first = documented(served, topic)
    assert len(first) > 1, "rolled"
    assert first == on_disk(partition_dir)
    assert sum(s[2] for s in first) == 6

    produce(served, topic, ["k0", "k1", "k2"], at=TIMESTAMP_MS + 100)  # three records in one batch
    grown = documented(served, topic)
    assert grown == on_disk(partition_dir) and sum(s[2] for s in grown) == 9
    assert grown[-1][2] > first[-1][2] or len(grown) > len(first)

    path = f"/v1/topics/{topic}/partitions/0/delete-records"
    assert served.client.post(path, json={"before_offset": 4}).status_code == 200
    retention = served.client.post("/v1/retention/run").json()
    assert any(d["topic"] == topic for d in retention["deleted"]), retention
    kept = documented(served, topic)
    assert kept == on_disk(partition_dir) and len(kept) < len(grown)
    assert kept[0][0] == grown[len(grown) - len(kept)][0], "the oldest segments went"

    patch = {"set": {"cleanup.policy": "compact"}}
    assert served.client.patch(f"/v1/topics/{topic}/configs", json=patch).status_code == 200
    for i in range(6):  # the same keys again, in segments that roll: the cleaner can drop the older ones
        produce(served, topic, [f"k{i % 3}"], at=TIMESTAMP_MS + 200 + i)
    before_cleaning = documented(served, topic)
    cleaned = served.client.post("/v1/cleaner/run", json={"topic": topic, "partition": 0})
    assert cleaned.status_code == 200, cleaned.text
    after = documented(served, topic)
    assert after == on_disk(partition_dir)
    assert sum(s[2] for s in after) < sum(s[2] for s in before_cleaning), "duplicates removed"
    assert documented(served, topic) == after, "a second GET reads the same"

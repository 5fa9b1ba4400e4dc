"""Partitions, DeleteRecords, checkpoints, retention, explain, the cleaner and the scheduler over HTTP."""

from __future__ import annotations

import pytest

from service.storage.topic_partition import TopicPartition
from tests.api.conftest import Served, assert_problem, disk_snapshot, string_record, unique_topic_name

DAY_MS = 86_400_000


def produce_one_by_one(served: Served, topic: str, count: int, *, timestamp: int | None = None) -> None:
    for i in range(count):
        extra = {} if timestamp is None else {"timestamp": timestamp}
        record = string_record(f"k{i % 3}", f"value-{i}", **extra)
        response = served.client.post(f"/v1/topics/{topic}/partitions/0/records", json={"records": [record]})
        assert response.status_code == 200, response.text


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


def test_checkpoints_are_parsed_per_log_dir(served: Served, topic: str) -> None:
    produce_one_by_one(served, topic, 3)
    served.daemon.log_manager.get_log(TopicPartition(topic, 0)).flush()
    served.daemon.log_manager.checkpoint_recovery_points()  # what the scheduled task does
    files = served.client.get("/v1/checkpoints").json()["checkpoints"]
    assert {f["name"] for f in files} == {
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "cleaner-offset-checkpoint",
        "replication-offset-checkpoint",
    }
    assert all(f["log_dir"] == str(served.log_dir.resolve()) and f["error"] is None for f in files)
    one = served.client.get("/v1/checkpoints/recovery-point-offset-checkpoint").json()["checkpoints"]
    assert len(one) == 1
    assert {"topic": topic, "partition": 0, "offset": 3} in one[0]["entries"]
    assert_problem(served.client.get("/v1/checkpoints/nope"), 404)


def test_a_retention_change_applies_live_and_a_pass_deletes(served: Served) -> None:
    topic = unique_topic_name("retention")
    served.client.post("/v1/topics", json={"name": topic, "configs": {"segment.bytes": 200}})
    two_days_ago = served.daemon.clock.now_ms() - 2 * DAY_MS
    produce_one_by_one(served, topic, 6, timestamp=two_days_ago)

    def ours(document: dict[str, object]) -> list[dict[str, object]]:
        deleted = document["deleted"]
        assert isinstance(deleted, list)
        return [d for d in deleted if d["topic"] == topic]

    assert ours(served.client.post("/v1/retention/run").json()) == [], "7 days by default: nothing"
    served.client.patch(f"/v1/topics/{topic}/configs", json={"set": {"retention.ms": DAY_MS}})
    before = disk_snapshot(served.log_dir / f"{topic}-0")
    dry = served.client.post("/v1/retention/run", params={"dry_run": True}).json()
    assert dry["dry_run"] is True and len(ours(dry)) >= 1
    assert disk_snapshot(served.log_dir / f"{topic}-0") == before, "a dry run changes nothing"

    done = served.client.post("/v1/retention/run").json()
    assert done["dry_run"] is False and ours(done) == ours(dry)
    assert {d["reason"] for d in ours(done)} == {"time"}
    assert set(ours(done)[0]) == {"topic", "partition", "base_offset", "size_bytes", "reason"}
    log = served.daemon.log_manager.get_log(TopicPartition(topic, 0))
    assert log.log_start_offset > 0
    assert any(p.name.endswith(".log.deleted") for p in (served.log_dir / f"{topic}-0").iterdir())


def test_explain_is_the_cli_document(served: Served) -> None:
    topic = unique_topic_name("explain")
    served.client.post("/v1/topics", json={"name": topic, "partitions": 2, "configs": {"segment.bytes": 200}})
    produce_one_by_one(served, topic, 4)
    doc = served.client.get("/v1/retention/explain", params={"topic": topic}).json()
    assert [(p["topic"], p["partition"]) for p in doc["partitions"]] == [(topic, 0), (topic, 1)]
    part = doc["partitions"][0]
    assert {
        "log_dir",
        "log_start_offset",
        "log_end_offset",
        "cleanup_policy",
        "segments",
        "cleaner",
    } <= part.keys()
    assert part["segments"][-1]["verdict"] == "keep" and part["segments"][-1]["reason"] == "active-segment"
    assert part["cleaner"]["reason"] == "not-compacted" and part["cleaner"]["would_clean"] is False
    one = served.client.get("/v1/retention/explain", params={"topic": topic, "partition": 1}).json()
    assert [(p["topic"], p["partition"]) for p in one["partitions"]] == [(topic, 1)]
    everything = served.client.get("/v1/retention/explain").json()["partitions"]
    assert [p["partition"] for p in everything if p["topic"] == topic] == [0, 1]
    assert_problem(served.client.get("/v1/retention/explain", params={"topic": "never-created"}), 404)
    assert_problem(
        served.client.get("/v1/retention/explain", params={"partition": 0}), 422, field="partition"
    )
    assert_problem(served.client.get("/v1/retention/explain", params={"topic": ".."}), 422, field="topic")


def test_forced_cleaning_and_cleaner_status(served: Served) -> None:
    topic = unique_topic_name("clean")
    configs = {"cleanup.policy": "compact", "segment.bytes": 200}
    served.client.post("/v1/topics", json={"name": topic, "configs": configs})
    produce_one_by_one(served, topic, 9)
    cleaned = served.client.post("/v1/cleaner/run", json={"topic": topic, "partition": 0})
    assert cleaned.status_code == 200, cleaned.text
    (entry,) = cleaned.json()["cleaned"]
    assert {"topic", "partition", "first_dirty_offset", "end_offset", "stats"} <= entry.keys()
    assert entry["first_dirty_offset"] == 0 and entry["end_offset"] > 0
    checkpoint = served.client.get("/v1/checkpoints/cleaner-offset-checkpoint").json()["checkpoints"][0]
    assert {"topic": topic, "partition": 0, "offset": entry["end_offset"]} in checkpoint["entries"]
    status = served.client.get("/v1/cleaner")
    assert status.status_code == 200 and isinstance(status.json(), dict)

    assert_problem(
        served.client.post("/v1/cleaner/run", json={"topic": "never-created", "partition": 0}), 404
    )
    plain = unique_topic_name("plain")
    served.client.post("/v1/topics", json={"name": plain})
    assert_problem(served.client.post("/v1/cleaner/run", json={"topic": plain, "partition": 0}), 409)
    for bad, field in [
        ({"topic": topic}, "partition"),
        ({"topic": "a/b", "partition": 0}, "topic"),
        ({"topic": topic, "partition": -1}, "partition"),
    ]:
        assert_problem(served.client.post("/v1/cleaner/run", json=bad), 422, field=field)


def test_scheduler_jobs_have_kafkas_names(served: Served) -> None:
    jobs = {j["name"]: j for j in served.client.get("/v1/scheduler/jobs").json()["jobs"]}
    assert {"kafka-log-retention", "kafka-log-flusher", "kafka-recovery-point-checkpoint"} <= jobs.keys()
    retention = jobs["kafka-log-retention"]
    assert retention["period_ms"] == 300_000 and retention["runs"] == 0 and retention["next_run_ms"] > 0


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_health(served: Served, path: str) -> None:
    assert served.client.get(path).status_code == 200


def test_unknown_routes_and_methods_are_problems(served: Served) -> None:
    assert_problem(served.client.get("/v1/nothing-here"), 404)
    assert_problem(served.client.put("/v1/topics"), 405)


@pytest.mark.parametrize("bad", ["0", True, 0.0, "00"], ids=repr)
def test_partition_numbers_in_bodies_are_strict(served: Served, topic: str, bad: object) -> None:
    before = disk_snapshot(served.log_dir)
    run = served.client.post("/v1/cleaner/run", json={"topic": topic, "partition": bad})
    assert_problem(run, 422, field="partition")
    grow = served.client.post(f"/v1/topics/{topic}/partitions", json={"count": bad})
    assert_problem(grow, 422, field="count")
    assert disk_snapshot(served.log_dir) == before


def test_a_config_change_over_rest_is_one_audit_line_per_key(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    topic = unique_topic_name("audited")
    served.client.post("/v1/topics", json={"name": topic})
    with caplog.at_level("INFO", logger="logcleaner.audit"):
        changes = {"set": {"retention.ms": 86_400_000, "cleanup.policy": "compact,delete"}}
        assert served.client.patch(f"/v1/topics/{topic}/configs", json=changes).status_code == 200
    lines = [
        r.getMessage() for r in caplog.records if r.name == "logcleaner.audit" and topic in r.getMessage()
    ]
    assert sorted(lines) == [
        f"Topic config changed: {topic} cleanup.policy delete [default] -> compact,delete [override]",
        f"Topic config changed: {topic} retention.ms 604800000 [default] -> 86400000 [override]",
    ]

"""``/v1/retention``: a retention change applied live, a pass run over HTTP deleting what it names, and
``GET /v1/retention/explain``, the document ``logcleaner explain --json`` prints."""

from __future__ import annotations

from service.storage.topic_partition import TopicPartition
from tests.api.conftest import Served, assert_problem, disk_snapshot, produce_one_by_one, unique_topic_name

DAY_MS = 86_400_000


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

"""``__cluster_metadata`` over HTTP, on a broker's log dirs: its creation is refused as Kafka refuses it,
with nothing written; a topic whose name only starts with it is an ordinary topic."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.errors import InvalidInputError
from service.storage.log_files import METADATA_TOPIC_CREATION_PROHIBITED
from tests.api.conftest import assert_problem, serve_daemon
from tests.service.broker_layout import METADATA_DIR, make_broker_dirs, snapshot


@pytest.mark.parametrize(
    "body", [{"partitions": 1}, {"partitions": 3, "configs": {"retention.ms": 5}}], ids=str
)
def test_creating_the_metadata_topic_is_refused_and_creates_nothing(
    tmp_path: Path, body: dict[str, object]
) -> None:
    (log_dir,) = make_broker_dirs(tmp_path, {"logs": ["orders-0"]})
    with serve_daemon(log_dir) as served:
        before = snapshot(tmp_path)
        refused = assert_problem(
            served.client.post("/v1/topics", json={"name": "__cluster_metadata", **body}), 422, field="name"
        )
        assert METADATA_TOPIC_CREATION_PROHIBITED in str(refused["detail"])
        assert snapshot(tmp_path) == before
        assert served.daemon.topic_store.get("__cluster_metadata") == {}
        assert [t["name"] for t in served.client.get("/v1/topics").json()["topics"]] == ["orders"]
        with pytest.raises(InvalidInputError, match="Creation of internal topic __cluster_metadata"):
            served.daemon.log_manager.create_topic("__cluster_metadata", 2)
        assert snapshot(tmp_path) == before
    assert sorted(p.name for p in log_dir.iterdir() if p.is_dir()) == [METADATA_DIR, "orders-0"]


def test_a_topic_named_like_the_metadata_log_is_an_ordinary_topic(tmp_path: Path) -> None:
    (log_dir,) = make_broker_dirs(tmp_path, {"logs": []})
    metadata_before = snapshot(log_dir / METADATA_DIR)
    with serve_daemon(log_dir) as served:
        created = served.client.post("/v1/topics", json={"name": "__cluster_metadata-x", "partitions": 2})
        assert created.status_code == 201, created.text
        record = {
            "records": [{"key": {"type": "STRING", "data": "k"}, "value": {"type": "STRING", "data": "v"}}]
        }
        produced = served.client.post("/v1/topics/__cluster_metadata-x/partitions/1/records", json=record)
        assert produced.status_code == 200, produced.text
    # The broker's metadata does not know a topic created through logcleaner: read with it, the topic's
    # dirs are stray replicas (Kafka's isStrayKraftReplica), listed and left alone; read without it, they
    # are loaded again after a restart, not skipped for their name.
    with serve_daemon(log_dir) as served:
        strays = served.client.get("/v1/logs/stray").json()["partitions"]
        assert sorted((s["topic"], s["partition"]) for s in strays) == [
            ("__cluster_metadata-x", 0),
            ("__cluster_metadata-x", 1),
        ]
    with serve_daemon(log_dir, {"metadata.log.ignore": "true"}) as served:
        partitions = served.client.get("/v1/topics/__cluster_metadata-x").json()["partitions"]
        assert [(p["partition"], p["log_end_offset"]) for p in partitions] == [(0, 0), (1, 1)]
    assert snapshot(log_dir / METADATA_DIR) == metadata_before

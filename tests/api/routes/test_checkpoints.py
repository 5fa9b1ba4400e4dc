"""``GET /v1/checkpoints``: each log dir's checkpoint files parsed, over HTTP."""

from __future__ import annotations

from service.storage.topic_partition import TopicPartition
from tests.api.conftest import Served, assert_problem, produce_one_by_one


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

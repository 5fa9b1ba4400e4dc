"""``/v1/logs`` over HTTP: what start-up left out, and why. ``failed`` lists the partitions that could not
load (with their log dir and reason) and the corrupt topic-config copies set aside; ``stray`` the stray
replicas (a ``-stray`` dir, Kafka's mark), left as they are on disk. A daemon that left nothing out lists
nothing. (Each kind of corrupt file is in ``tests/api/test_load_failures.py``.)"""

from __future__ import annotations

from pathlib import Path

from service.config.topic_store import TOPIC_CONFIGS_FILE
from tests.api.conftest import Served, serve_daemon

STRAY_DIR = "t-5.0f1e2d3c4b5a69788796a5b4c3d2e1f0-stray"


def test_nothing_left_out_lists_nothing(served: Served) -> None:
    assert served.client.get("/v1/logs/failed").json() == {"partitions": [], "topic_config_files": []}
    assert served.client.get("/v1/logs/stray").json() == {"partitions": []}


def test_a_failed_partition_a_set_aside_config_file_and_a_stray_replica_are_listed(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    with serve_daemon(log_dir) as served:
        assert served.client.post("/v1/topics", json={"name": "healthy"}).status_code == 201
    (log_dir / "broken-0").mkdir()
    (log_dir / "broken-0" / "00000000000000000abc.log").write_bytes(b"")  # not a segment's name
    (log_dir / TOPIC_CONFIGS_FILE).write_bytes(b'{"version": 2, "topics": {"healthy": ')
    (log_dir / STRAY_DIR).mkdir()
    resolved = log_dir.resolve()

    with serve_daemon(log_dir) as served:
        failed = served.client.get("/v1/logs/failed").json()
        stray = served.client.get("/v1/logs/stray").json()["partitions"]

    [partition] = failed["partitions"]
    assert (partition["topic"], partition["partition"], partition["log_dir"]) == ("broken", 0, str(resolved))
    assert "00000000000000000abc.log" in partition["reason"]
    [aside] = failed["topic_config_files"]
    assert aside["path"] == str(log_dir / TOPIC_CONFIGS_FILE)
    assert Path(aside["kept_as"]).read_bytes().startswith(b'{"version": 2')
    assert [(s["topic"], s["partition"], Path(s["path"]).name) for s in stray] == [("t", 5, STRAY_DIR)]
    assert (log_dir / STRAY_DIR).is_dir()

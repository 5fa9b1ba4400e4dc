"""A scrape and the checkpoint tasks never wait for a retention pass (issue 17).

A real daemon runs a real retention pass (``POST /v1/retention/run``, over real HTTP) that stops inside
its first log, holding that log's lock, through the LogManager's ``on_retention_log`` seam. Meanwhile
``/metrics`` must answer with that log's figures, and both checkpoint tasks must complete and write the
files. Then the pass is let go and finishes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log import PartitionLog
from service.storage.log_files import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from service.storage.topic_partition import TopicPartition
from tests.api.conftest import Served, serve_daemon, string_record

TOPIC = "held"
WAIT_S = 10.0  # far above what either answer takes; a regression waits for the pass, which never ends


@pytest.fixture
def served_topic(tmp_path: Path) -> Iterator[Served]:
    """A daemon whose topic ``held`` has 2 partitions; partition 0 holds 6 records over 3 segments and its
    log start offset was moved to 1 (so the log-start-offset checkpoint has an entry to write)."""
    with serve_daemon(tmp_path / "logs") as served:
        client = served.client
        created = client.post("/v1/topics", json={"name": TOPIC, "partitions": 2, "configs": {}})
        assert created.status_code == 201, created.text
        manager = served.daemon.log_manager
        log = manager.get_log(TopicPartition(TOPIC, 0))
        for i in range(3):
            path = f"/v1/topics/{TOPIC}/partitions/0/records"
            records = [string_record(f"k{i}", f"v{i}"), string_record(f"k{i}", f"w{i}")]
            assert client.post(path, json={"records": records}).status_code == 200
            log.roll()
        moved = client.post(f"/v1/topics/{TOPIC}/partitions/0/delete-records", json={"before_offset": 1})
        assert moved.status_code == 200, moved.text
        yield served


@contextmanager
def retention_held_in_flight(served: Served) -> Iterator[PartitionLog]:
    """A retention pass in flight, stopped inside its first log (lock held); yields that log."""
    manager = served.daemon.log_manager
    entered = threading.Event()
    release = threading.Event()
    held: list[PartitionLog] = []

    def hold(log: PartitionLog) -> None:
        if not held:
            held.append(log)
            entered.set()
            release.wait(timeout=60)

    manager.on_retention_log = hold
    answers: list[int] = []

    def run_retention() -> None:
        answers.append(served.client.post("/v1/retention/run", timeout=120).status_code)

    runner = threading.Thread(target=run_retention)
    runner.start()
    try:
        assert entered.wait(timeout=WAIT_S), "the retention pass did not start"
        assert not held[0].lock.acquire(blocking=False), "the pass holds the log's lock"
        yield held[0]
    finally:
        release.set()
        runner.join(timeout=60)
        manager.on_retention_log = None
    assert answers == [200], "the retention pass finished once let go"


def test_a_scrape_answers_while_a_retention_pass_holds_a_log(served_topic: Served) -> None:
    served = served_topic
    with retention_held_in_flight(served) as log:
        response = served.client.get("/metrics", timeout=WAIT_S)
        assert response.status_code == 200
        tp = log.topic_partition
        labels = f'topic="{tp.topic}",partition="{tp.partition}"'
        assert f"kafka_log_log_logendoffset{{{labels}}} {log.log_end_offset}" in response.text
        assert f"kafka_log_log_numlogsegments{{{labels}}} {len(log.snapshot.segments)}" in response.text


def test_checkpoint_tasks_complete_while_a_retention_pass_holds_a_log(served_topic: Served) -> None:
    served = served_topic
    manager = served.daemon.log_manager
    log_dir = manager.log_dirs[0]
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
        (log_dir / name).unlink(missing_ok=True)  # so the files below are this test's writes
    with retention_held_in_flight(served):
        done = threading.Event()

        def checkpoint() -> None:
            manager.checkpoint_recovery_points()
            manager.checkpoint_log_start_offsets()
            done.set()

        threading.Thread(target=checkpoint, daemon=True).start()
        assert done.wait(timeout=WAIT_S), "a checkpoint task waited for the retention pass"
        start_offsets = OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).read()
        assert start_offsets == {TopicPartition(TOPIC, 0): 1}
        recovery_points = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read()
        assert set(recovery_points) == {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)}

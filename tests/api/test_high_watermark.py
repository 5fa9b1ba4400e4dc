"""The daemon on a broker's dir whose high watermark (160) is below the log end (600), over HTTP.

Reads stop at the high watermark as a Kafka consumer's do, DeleteRecords may not pass it, a produce by
logcleaner moves it to the log end, and ``replication-offset-checkpoint`` is written by the scheduled task
and at shutdown with the lines of partitions logcleaner does not manage unchanged; deleting the topic drops
its line.
"""

from __future__ import annotations

import time
from pathlib import Path

from service.storage.topic_partition import TopicPartition
from tests.api.conftest import assert_problem, serve_daemon, string_record
from tests.service.high_watermark_helpers import (
    FUTURE,
    FUTURE_HIGH_WATERMARK,
    HIGH_WATERMARK,
    LOG_END,
    make_broker_dir,
    read_high_watermark_file,
)

T0 = TopicPartition("t", 0)
PARTITION = "/v1/topics/t/partitions/0"


def test_reads_deletes_and_produce_follow_the_brokers_high_watermark(tmp_path: Path) -> None:
    log_dir = make_broker_dir(tmp_path / "logs", "t")
    # A ZooKeeper-era copy: its topic configs are unknown unless the broker's are taken (DeleteRecords needs
    # a known 'delete' policy).
    with serve_daemon(log_dir, {"unknown.topic.configs": "broker-defaults"}) as served:
        client = served.client
        detail = client.get(PARTITION).json()
        assert (detail["high_watermark"], detail["log_end_offset"]) == (HIGH_WATERMARK, LOG_END)
        fetched = client.get(f"{PARTITION}/records", params={"offset": 150, "max_records": 500}).json()
        assert [r["offset"] for r in fetched["records"]] == list(range(150, HIGH_WATERMARK))
        assert (fetched["next_offset"], fetched["high_watermark"]) == (HIGH_WATERMARK, HIGH_WATERMARK)
        above = client.get(f"{PARTITION}/records", params={"offset": 300}).json()
        assert (above["records"], above["next_offset"]) == ([], 300), "inside the log, not yet acknowledged"
        assert_problem(client.get(f"{PARTITION}/records", params={"offset": LOG_END + 1}), 416)
        body = assert_problem(client.post(f"{PARTITION}/delete-records", json={"before_offset": 300}), 416)
        assert str(HIGH_WATERMARK) in str(body["detail"])
        deleted = client.post(f"{PARTITION}/delete-records", json={"before_offset": -1}).json()
        assert deleted["log_start_offset"] == HIGH_WATERMARK, "-1: the high watermark"

        produced = client.post(f"{PARTITION}/records", json={"records": [string_record("k", "new")]})
        assert produced.status_code == 200, produced.text
        assert client.get(PARTITION).json()["high_watermark"] == LOG_END + 1, "logcleaner is the only replica"
        served.daemon.log_manager.checkpoint_high_watermarks()  # what the scheduled task does
        assert read_high_watermark_file(log_dir) == {T0: LOG_END + 1, FUTURE: FUTURE_HIGH_WATERMARK}

        created = client.post("/v1/topics", json={"name": "fresh", "partitions": 1})
        assert created.status_code == 201, created.text
        assert client.delete("/v1/topics/t").status_code == 202
        assert read_high_watermark_file(log_dir) == {
            FUTURE: FUTURE_HIGH_WATERMARK,
            TopicPartition("fresh", 0): 0,
        }
    assert read_high_watermark_file(log_dir) == {FUTURE: FUTURE_HIGH_WATERMARK, TopicPartition("fresh", 0): 0}


def test_the_scheduled_task_writes_the_file_and_a_clean_stop_writes_it_last(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    overrides = {"scheduler.initial.delay.ms": "0", "replica.high.watermark.checkpoint.interval.ms": "50"}
    with serve_daemon(log_dir, overrides) as served:
        client = served.client
        assert client.post("/v1/topics", json={"name": "own", "partitions": 1}).status_code == 201
        records = {"records": [string_record(f"k{i}", "v") for i in range(3)]}
        assert client.post("/v1/topics/own/partitions/0/records", json=records).status_code == 200
        own = TopicPartition("own", 0)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            path = log_dir / "replication-offset-checkpoint"
            if path.exists() and read_high_watermark_file(log_dir).get(own) == 3:
                break
            time.sleep(0.05)
        assert read_high_watermark_file(log_dir) == {own: 3}, "written by highwatermark-checkpoint"
        jobs = {job["name"]: job for job in client.get("/v1/scheduler/jobs").json()["jobs"]}
        assert jobs["highwatermark-checkpoint"]["period_ms"] == 50
        served.daemon.scheduler.shutdown(wait=True)  # no run of the task after the append below
        assert client.post("/v1/topics/own/partitions/0/records", json=records).status_code == 200
    assert read_high_watermark_file(log_dir) == {own: 6}, "the clean stop wrote the last high watermark"

"""A log dir made by the service (``gen``, then ``serve`` producing over HTTP, then a clean stop) holds in
each partition exactly the files a broker's would: ``.log``, ``.index``, ``.timeindex`` per segment,
``.snapshot`` per roll and at the log end offset, ``.txnindex`` where aborts exist,
``leader-epoch-checkpoint`` and ``partition.metadata``, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from service.base.clock import SystemClock
from service.shell.cli import main
from service.storage.control import encode_end_txn_marker_batch
from service.storage.leader_epoch_checkpoint import EpochEntry, read_leader_epoch_checkpoint
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.partition_metadata import decode_partition_metadata
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from service.storage.txn_index import decode_entries
from tests.service.serve_process import READY, Serve

SEGMENT_BYTES = 2048
ABORTING_PRODUCER = 9


def gen_events(log_dir: Path) -> None:
    args = ["gen", "--log-dir", str(log_dir), "--topic", "events", "--partitions", "2", "--records", "200"]
    args += ["--batch-size", "10", "--value-size", "30", "--segment-bytes", str(SEGMENT_BYTES)]
    assert main(args) == 0


def abort_a_transaction(log_dir: Path) -> int:
    """A transactional batch then its ABORT marker in events-0; return the marker's offset."""
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=SEGMENT_BYTES), clock=SystemClock())
    log = loaded.logs[TopicPartition("events", 0)]
    now = SystemClock().now_ms()
    log.append_records(
        [Record(0, now, b"t", b"doomed")],
        producer_id=ABORTING_PRODUCER,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    marker_offset = log.log_end_offset
    log.append_batches(
        encode_end_txn_marker_batch(
            offset=0, producer_id=ABORTING_PRODUCER, producer_epoch=0, commit=False, timestamp=now
        )
    )
    close_log_dir(loaded)
    return marker_offset


def produce(url: str, topic: str, partition: int, count: int) -> None:
    for i in range(count):
        body = {
            "records": [
                {
                    "key": {"type": "STRING", "data": f"k{i % 7}"},
                    "value": {"type": "STRING", "data": "v" * 60},
                }
            ]
        }
        response = httpx.post(f"{url}/v1/topics/{topic}/partitions/{partition}/records", json=body)
        assert response.status_code == 200, response.text


def check_broker_files(directory: Path) -> tuple[list[int], list[int], list[int]]:
    """Assert the partition holds only a broker's files; return its segment, snapshot and txnindex bases."""
    names = {p.name for p in directory.iterdir()}
    per_offset = [n for n in names if re.fullmatch(r"\d{20}\.[a-z]+", n)]
    assert names - set(per_offset) == {"leader-epoch-checkpoint", "partition.metadata"}, names
    by_suffix: dict[str, list[int]] = {}
    for name in per_offset:
        base, suffix = name.split(".")
        by_suffix.setdefault(suffix, []).append(int(base))
    assert set(by_suffix) <= {"log", "index", "timeindex", "snapshot", "txnindex"}, names
    segments = sorted(by_suffix["log"])
    assert sorted(by_suffix["index"]) == segments and sorted(by_suffix["timeindex"]) == segments
    txnindexes = sorted(by_suffix.get("txnindex", []))
    assert set(txnindexes) <= set(segments)
    return segments, sorted(by_suffix.get("snapshot", [])), txnindexes


def log_end_offsets(log_dir: Path) -> dict[TopicPartition, int]:
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(), clock=SystemClock())
    try:
        return {tp: log.log_end_offset for tp, log in loaded.logs.items()}
    finally:
        for log in loaded.logs.values():
            log.close()


@pytest.mark.slow
def test_a_dir_made_by_gen_and_serve_holds_exactly_a_brokers_files(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    gen_events(log_dir)
    marker_offset = abort_a_transaction(log_dir)
    closed_at = log_end_offsets(log_dir)  # where gen and the abort closed: each left a snapshot there

    serve = Serve(log_dir, "scheduler.initial.delay.ms=3600000", "log.cleaner.enable=false")
    serve.wait_for(READY)
    found = re.search(r"REST API listening on (http://127\.0\.0\.1:\d+)", serve.log)
    assert found, serve.log
    url = found.group(1)
    created = httpx.post(
        f"{url}/v1/topics", json={"name": "orders", "partitions": 1, "configs": {"segment.bytes": "1024"}}
    )
    assert created.status_code == 201, created.text
    produce(url, "orders", 0, 40)
    produce(url, "events", 1, 40)
    assert serve.stop() == 0, serve.log

    ends = log_end_offsets(log_dir)
    topic_ids: dict[str, set[str]] = {}
    for tp, end in ends.items():
        directory = log_dir / f"{tp.topic}-{tp.partition}"
        segments, snapshots, txnindexes = check_broker_files(directory)
        assert len(segments) > 1, f"{tp} should have rolled"
        # a snapshot at each roll (named by the new segment's base) and at the log end offset on close;
        # an earlier close's snapshot above its last segment base stays, as on a broker
        assert set(segments[1:]) | {end} <= set(snapshots)
        assert set(snapshots) <= set(segments[1:]) | {end, closed_at.get(tp, end)}
        if tp == TopicPartition("events", 0):
            holder = max(base for base in segments if base <= marker_offset)  # the marker's segment
            assert txnindexes == [holder]
            [aborted] = decode_entries((directory / f"{holder:020d}.txnindex").read_bytes())
            assert aborted.producer_id == ABORTING_PRODUCER and aborted.last_offset == marker_offset
        else:
            assert txnindexes == []  # nothing aborted: no transaction index, as Kafka creates it lazily
        assert read_leader_epoch_checkpoint(directory) == [EpochEntry(0, 0)]
        metadata = decode_partition_metadata((directory / "partition.metadata").read_bytes())
        assert metadata.version == 0
        topic_ids.setdefault(tp.topic, set()).add(metadata.topic_id)
    assert set(ends) == {
        TopicPartition("events", 0),
        TopicPartition("events", 1),
        TopicPartition("orders", 0),
    }
    assert all(len(ids) == 1 for ids in topic_ids.values())  # one id per topic, shared by its partitions
    assert len({next(iter(ids)) for ids in topic_ids.values()}) == 2

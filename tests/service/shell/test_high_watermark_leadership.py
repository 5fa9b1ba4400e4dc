"""The high watermark at load as Kafka's leader sets it (``Partition.makeLeader``).

A partition this node leads with no other in-sync replica starts at its log end: records acknowledged before
a kill are served after it. The metadata log says who leads (``PartitionRecord``, then
``PartitionChangeRecord``); in a dir no broker wrote ``meta.properties`` into, logcleaner leads every
partition alone; on any other (a ZooKeeper-era broker's copy, a follower's partition) the checkpointed high
watermark holds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from service.base.clock import SystemClock
from service.metadata.log_writer import MetadataRecordSpec
from service.metadata.records import PARTITION_CHANGE_RECORD_KEY
from service.shell.cli import main
from service.storage.checkpoints import encode_checkpoint
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.partition_files import create_partition_metadata
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.metadata.metadata_helpers import NODE_ID, partition, read_image, topic, write_segment

RECORDS = 30
OTHER = 2  # another broker
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def change(
    topic_id: str, partition_id: int, *, isr: Sequence[int] | None = None, leader: int | None = None
) -> MetadataRecordSpec:
    """A ``PartitionChangeRecord``; a field left out (None) is not changed, as in Kafka."""
    fields: dict[str, object] = {"partition_id": partition_id, "topic_id": topic_id, "replicas": None}
    fields["isr"] = None if isr is None else list(isr)
    if leader is not None:
        fields["leader"] = leader
    return MetadataRecordSpec(PARTITION_CHANGE_RECORD_KEY, 0, fields)


def make_partitions(log_dir: Path, names: Sequence[str]) -> None:
    """``RECORDS`` records in each ``t-<n>``, closed cleanly; every checkpoint entry 5 (a stale one)."""
    for name in names:
        (log_dir / name).mkdir(parents=True)
        create_partition_metadata(log_dir / name, TOPIC_ID)
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(), clock=SystemClock())
    for log in loaded.logs.values():
        for i in range(RECORDS):
            log.append_records([Record(0, SystemClock().now_ms(), b"k%d" % i, b"v")])
    close_log_dir(loaded)
    stale = {TopicPartition("t", int(name.rsplit("-", 1)[1])): 5 for name in names}
    (log_dir / "replication-offset-checkpoint").write_bytes(encode_checkpoint(stale))


def explain(capsys: pytest.CaptureFixture[str], log_dir: Path) -> dict[int, tuple[int, str]]:
    code = main(["explain", "--json", "--override", f"log.dirs={log_dir}"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return {
        p["partition"]: (p["high_watermark"], p["high_watermark_source"])
        for p in json.loads(out)["partitions"]
    }


def test_the_image_follows_leader_and_isr_through_partition_changes(tmp_path: Path) -> None:
    topic_id = TOPIC_ID
    write_segment(
        tmp_path,
        [
            [topic("t", topic_id), partition(topic_id, 0), partition(topic_id, 1, replicas=(NODE_ID, OTHER))],
            [partition(topic_id, 2, replicas=(OTHER, NODE_ID)), partition(topic_id, 3)],
            [change(topic_id, 1, isr=[NODE_ID]), change(topic_id, 2, isr=[NODE_ID], leader=NODE_ID)],
            [change(topic_id, 3, leader=-1), change(topic_id, 0)],  # no leader; an unrelated change
        ],
    )
    leadership = read_image(tmp_path).topics["t"].leadership
    assert {p: (s.leader, s.isr) for p, s in leadership.items()} == {
        0: (NODE_ID, (NODE_ID,)),
        1: (NODE_ID, (NODE_ID,)),
        2: (NODE_ID, (NODE_ID,)),
        3: (-1, (NODE_ID,)),
    }
    assert [p for p, s in leadership.items() if s.is_led_alone_by(NODE_ID)] == [0, 1, 2]


def test_a_kraft_brokers_partitions_led_alone_start_at_their_log_end(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """t-0: led alone; t-1: another in-sync replica; t-2: led by another broker; t-3: no longer led."""
    names = ["t-0", "t-1", "t-2", "t-3"]
    make_partitions(tmp_path, names)
    topic_id = TOPIC_ID
    write_segment(
        tmp_path,
        [
            [topic("t", topic_id), partition(topic_id, 0), partition(topic_id, 1, replicas=(NODE_ID, OTHER))],
            [partition(topic_id, 2, replicas=(OTHER, NODE_ID)), partition(topic_id, 3)],
            [change(topic_id, 3, leader=OTHER, isr=[OTHER])],
        ],
    )
    assert explain(capsys, tmp_path) == {
        0: (RECORDS, "leader-log-end"),
        1: (5, "checkpoint"),
        2: (5, "checkpoint"),
        3: (5, "checkpoint"),
    }


def test_a_zookeeper_era_copy_keeps_the_checkpoint_and_logcleaners_own_dir_the_log_end(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    make_partitions(tmp_path, ["t-0"])
    assert explain(capsys, tmp_path) == {0: (RECORDS, "leader-log-end")}, "no meta.properties: logcleaner's"
    (tmp_path / "meta.properties").write_text("version=0\nbroker.id=1\n")
    assert explain(capsys, tmp_path) == {0: (5, "checkpoint")}, "who led is not known"

"""A broker's ``log.dirs`` as a Kafka 3.x/4.x KRaft broker leaves them after a clean stop, for tests.

Each log dir holds ``meta.properties``, ``.lock``, the clean-shutdown marker, the three offset checkpoints
and ``replication-offset-checkpoint``; the first also holds ``__cluster_metadata-0`` (a segment a real
broker wrote, from ``tests/fixtures``, its ``quorum-state``, and a second segment that records the layout's
topics, their ids and their partitions on this node, as the broker's metadata would: without it every
partition dir would be a stray replica). Partition dirs are named as given, so a
test can lay out what a failure leaves (the same partition twice, ``t-007`` beside ``t-7``), each with
``partition.metadata`` and ``RECORDS_PER_PARTITION`` records.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from service.base.clock import SystemClock
from service.metadata.log_writer import encode_metadata_batch
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.log_files import CLEANER_OFFSET_CHECKPOINT, LOCK_FILE, parse_partition_dir_name
from service.storage.partition_metadata import new_topic_id, write_partition_metadata
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.paths import FIXTURES
from tests.service.metadata.metadata_helpers import partition, topic

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
RECORDS_PER_PARTITION = 20
SEGMENT_BYTES = 400
METADATA_DIR = "__cluster_metadata-0"


def make_broker_dirs(root: Path, layout: Mapping[str, Sequence[str]]) -> list[Path]:
    """Log dirs ``root/<name>`` holding the partition dirs ``layout[name]``; the first gets the metadata
    log. Returns the log dirs in ``layout``'s order."""
    log_dirs = []
    topic_ids: dict[str, str] = {}
    for number, (name, partition_dirs) in enumerate(layout.items()):
        log_dir = root / name
        log_dir.mkdir(parents=True)
        for dir_name in partition_dirs:
            _write_partition(log_dir, dir_name, topic_ids)
        _write_broker_files(log_dir, number)
        log_dirs.append(log_dir)
    partitions = {parse_partition_dir_name(d) for dirs in layout.values() for d in dirs}
    _write_metadata_log(log_dirs[0], topic_ids, sorted((p.topic, p.partition) for p in partitions))
    return log_dirs


def _write_partition(log_dir: Path, dir_name: str, topic_ids: dict[str, str]) -> None:
    """``dir_name`` with records, loaded and closed alone (so two copies of a partition get both)."""
    scratch = log_dir.parent / f".scratch-{log_dir.name}"
    parsed = parse_partition_dir_name(dir_name)
    tp = TopicPartition(parsed.topic, parsed.partition)
    partition = scratch / str(tp)
    partition.mkdir(parents=True)
    write_partition_metadata(partition, topic_ids.setdefault(tp.topic, new_topic_id()))
    loaded = load_log_dir(scratch, lambda _t: LogConfig(segment_bytes=SEGMENT_BYTES), clock=SystemClock())
    log = loaded.logs[tp]
    now = SystemClock().now_ms()
    for i in range(RECORDS_PER_PARTITION):
        log.append_records([Record(0, now, b"k%d" % i, b"%s:%d" % (dir_name.encode(), i))])
    close_log_dir(loaded)
    partition.rename(log_dir / dir_name)
    for checkpoint in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        entries = OffsetCheckpointFile(scratch / checkpoint).read()
        target = OffsetCheckpointFile(log_dir / checkpoint)
        target.write({**(target.read() if target.path.exists() else {}), **entries})
    shutil.rmtree(scratch)


def _write_broker_files(log_dir: Path, number: int) -> None:
    """What a KRaft broker keeps beside the partitions of each log dir."""
    (log_dir / "meta.properties").write_text(
        "#\n#Thu Nov 26 10:00:00 UTC 2026\n"
        f"node.id=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAA{number:02d}\nversion=1\ncluster.id={CLUSTER_ID}\n"
    )
    (log_dir / LOCK_FILE).touch()
    (log_dir / CLEANER_OFFSET_CHECKPOINT).write_text("0\n0\n")
    recovery = OffsetCheckpointFile(log_dir / "recovery-point-offset-checkpoint")
    if not recovery.path.exists():
        recovery.write({})
        OffsetCheckpointFile(log_dir / "log-start-offset-checkpoint").write({})
    replication = {tp: RECORDS_PER_PARTITION for tp in recovery.read()}
    OffsetCheckpointFile(log_dir / "replication-offset-checkpoint").write(replication)
    (log_dir / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":7}')


def _write_metadata_log(
    log_dir: Path, topic_ids: Mapping[str, str], partitions: Sequence[tuple[str, int]]
) -> None:
    metadata = log_dir / METADATA_DIR
    metadata.mkdir()
    shutil.copyfile(FIXTURES / "kraft-metadata-a.log", metadata / "00000000000000000000.log")
    records = [topic(name, topic_id) for name, topic_id in sorted(topic_ids.items())]
    records += [partition(topic_ids[name], number) for name, number in partitions]
    if records:  # after the fixture's offsets 0-3, as the broker's next segment
        batch = encode_metadata_batch(records, base_offset=4, timestamp=SystemClock().now_ms())
        (metadata / "00000000000000000004.log").write_bytes(batch)
    (metadata / "00000000000000000000.index").touch()
    (metadata / "00000000000000000000.timeindex").touch()
    (metadata / "leader-epoch-checkpoint").write_text("0\n1\n1 0\n")
    (metadata / "quorum-state").write_text(
        '{"leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],'
        '"data_version":0}'
    )


def snapshot(root: Path) -> dict[str, str]:
    """Every path below ``root`` with its content hash (dirs as "dir", symbolic links as their target)."""
    result: dict[str, str] = {}
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(directory, name)
            key = os.path.relpath(path, root)
            if path.is_symlink():
                result[key] = f"link to {os.readlink(path)}"
            elif path.is_dir():
                result[key] = "dir"
            else:
                result[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return result

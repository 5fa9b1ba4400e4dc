"""Logs the CLI tests write (partitions of records of a given age) and snapshots of a dir, which show a
command changed nothing."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from service.base.clock import SystemClock
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition

DAY_MS = 86_400_000


def make_logs(log_dir: Path, *, age_ms: int, count: int = 20) -> None:
    """One partition ``t-0`` with ``count`` records of the given age, in 300-byte segments."""
    (log_dir / "t-0").mkdir(parents=True)
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=300), clock=SystemClock())
    log = loaded.logs[TopicPartition("t", 0)]
    stamp = SystemClock().now_ms() - age_ms
    for i in range(count):
        log.append_records([Record(0, stamp, b"k%d" % i, b"v%d" % i)])
    close_log_dir(loaded)


def make_old_logs(log_dir: Path, partitions: int = 2, records: int = 30) -> None:
    """Partitions ``t-N`` of 10-day-old records in 300-byte segments: time retention deletes most."""
    for p in range(partitions):
        (log_dir / f"t-{p}").mkdir(parents=True)
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=300), clock=SystemClock())
    stamp = SystemClock().now_ms() - 10 * DAY_MS
    for p in range(partitions):
        log = loaded.logs[TopicPartition("t", p)]
        for i in range(records):
            log.append_records([Record(0, stamp, b"k%d" % i, b"v%d" % i)])
    close_log_dir(loaded)


def snapshot(root: Path) -> dict[str, str]:
    """Every path below ``root`` with its content hash (dirs as "dir")."""
    result: dict[str, str] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs:
            result[os.path.relpath(os.path.join(directory, name), root)] = "dir"
        for name in files:
            path = Path(directory, name)
            result[os.path.relpath(path, root)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return result

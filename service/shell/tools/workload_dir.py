"""Where a generated workload goes: a log dir loaded under its lock, filled, and closed as a broker would.

``write_workload`` is the frame every ``gen`` workload runs in: partitions missing from the dir are
created with their topic's ``partition.metadata``; the whole dir is loaded (so the checkpoints and the
clean-shutdown marker written at the end stay true for every partition), each target filled, and the dir
closed cleanly. A failed run closes the logs without the marker, so the next load recovers them.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from service.base.clock import Clock, SystemClock
from service.base.errors import InvalidInputError
from service.config.topic_store import TopicConfigStore
from service.core.stray_replicas import (
    StrayReplica,
    find_stray_replicas,
    survey_replica_dirs,
    unmanaged_partitions,
)
from service.shell.tools.gen_metadata import write_generated_metadata
from service.storage.dir_lock import LogDirLock
from service.storage.duplicate_dirs import check_no_duplicate_partition_dirs
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.log_dir import LoadedLogDir, close_log_dir, load_log_dir
from service.storage.log_files import partition_dir_name
from service.storage.partition_files import create_partition_metadata, load_topic_id
from service.storage.topic_partition import TopicPartition

__all__ = ["GenResult", "is_chosen", "write_workload"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GenResult:
    """One generated partition after the run: ``records`` appended now, the log's state after them."""

    topic: str
    partition: int
    records: int
    log_end_offset: int
    segments: int
    size_bytes: int

    def to_json(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "records": self.records,
            "log_end_offset": self.log_end_offset,
            "segments": self.segments,
            "size_bytes": self.size_bytes,
        }


def write_workload(
    log_dir: Path,
    targets: Sequence[TopicPartition],
    config: LogConfig,
    overrides: dict[str, str],
    fill: Callable[[PartitionLog, int], GenResult],
    *,
    clock: Clock | None = None,
    metadata_log: bool = False,
) -> list[GenResult]:
    """Load ``log_dir`` under its lock, ``fill`` each target partition (created if missing, with ``config``)
    given the time now, close the dir cleanly and store ``overrides`` as the targets' topic configs: as
    logcleaner's overrides, or with ``metadata_log`` as ConfigRecords of a metadata log (``gen_metadata``)
    that also records the topics and their partitions."""
    clock = clock or SystemClock()
    log_dir.mkdir(parents=True, exist_ok=True)
    log_dir = log_dir.resolve()  # as the load names its partition dirs
    topics = {tp.topic for tp in targets}
    replicas = survey_replica_dirs([log_dir])
    strays = find_stray_replicas(replicas)
    _refuse_strays(strays, targets)
    # As every command that loads a log dir: nothing written.
    check_no_duplicate_partition_dirs([log_dir], strays=[s.path for s in strays])
    with LogDirLock(log_dir):
        created = _create_partition_dirs(log_dir, list(targets))
        loaded = load_log_dir(
            log_dir,
            lambda topic: config if topic in topics else LogConfig(),
            clock=clock,
            strays=[s.path for s in strays],
        )
        try:
            now_ms = clock.now_ms()
            results = [fill(loaded.logs[tp], now_ms) for tp in targets]
        except BaseException:
            _close_unclean(loaded)
            _remove_created(created)
            raise
        close_log_dir(loaded, unmanaged=unmanaged_partitions(log_dir, replicas, strays))
        if metadata_log:
            write_generated_metadata(log_dir, targets, overrides, now_ms=now_ms)
        elif overrides:
            store = TopicConfigStore([log_dir])
            for topic in sorted(topics):
                store.update(topic, overrides)
    return results


def _refuse_strays(strays: Sequence[StrayReplica], targets: Sequence[TopicPartition]) -> None:
    """A target held by a stray replica under its own name: the replica is not the topic's, so gen may not
    append to it (nor create another dir of that name)."""
    wanted = set(targets)
    held = [
        s
        for s in strays
        if s.topic_partition in wanted
        and s.path.name == partition_dir_name(s.topic_partition.topic, s.topic_partition.partition)
    ]
    if held:
        raise InvalidInputError(
            f"{held[0].path} is a stray replica ({held[0].reason}); gen writes only to the topic's own "
            "partitions: remove the stray dir or choose another topic"
        )


def _create_partition_dirs(log_dir: Path, targets: list[TopicPartition]) -> list[Path]:
    """Missing partition dirs, each with the ``partition.metadata`` of its topic (one id per topic); the
    dirs created."""
    topic_ids: dict[str, str | None] = {}
    for tp in targets:
        directory = log_dir / partition_dir_name(tp.topic, tp.partition)
        if directory.is_dir():
            topic_ids[tp.topic] = topic_ids.get(tp.topic) or load_topic_id(directory)
    created = []
    for tp in targets:
        directory = log_dir / partition_dir_name(tp.topic, tp.partition)
        if not directory.is_dir():
            directory.mkdir()
            created.append(directory)
            topic_ids[tp.topic] = create_partition_metadata(directory, topic_ids.get(tp.topic))
    return created


def _remove_created(created: list[Path]) -> None:
    """After a failed run (bad options found on the first batch, an interrupt): the partitions this run
    created go, so a mistyped ``gen`` leaves no new topic in a broker's dir. Everything in them is this
    run's (the dir lock is held); partitions that existed before keep what was appended, recovered on the
    next load."""
    for directory in created:
        try:
            shutil.rmtree(directory)
        except OSError:
            logger.warning("Could not remove %s, created by the failed gen run", directory, exc_info=True)


def _close_unclean(loaded: LoadedLogDir) -> None:
    """After a failed run: release the files but write no marker, so the next load recovers the logs."""
    for log in loaded.logs.values():
        try:
            log.close()
        except Exception:
            logger.exception("Could not close %s after a failed gen run", log.directory)


def is_chosen(index: int, share: float) -> bool:
    """Whether item ``index`` is among a ``share`` of them (future batches, aborted transactions, expired
    groups): exactly ``round-down(share * n)`` of the first n are, spread evenly."""
    return int((index + 1) * share) > int(index * share)

"""The core's side of the API's port (``service.core.ports.LogQueries``): the REST routes' questions answered
from the LogManager, the topic overrides' store and the broker's metadata log, each under the locks the
core keeps.

A route never holds a log's lock: the figures of a partition are read here, under its lock, and its
segments' files outside it (a segment deleted meanwhile shows what is known of it). The partition
document costs O(segments), plus a read of its dir's ``cleaner-offset-checkpoint``: each segment keeps its
record count as it grows (``LogSegment.record_count``) and its largest timestamp in memory, so no GET
reads a batch header another has read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from service.base.errors import CorruptDataError, NotFoundError
from service.config.broker_config import BrokerConfig
from service.config.config_layers import DynamicConfigs
from service.config.topic_config import ConfigEntry, describe_topic_config
from service.config.topic_store import SetAsideFile, TopicConfigStore
from service.core.cleanable import cleaner_checkpoints, log_to_clean
from service.core.engine_choice import EngineChoice
from service.core.log_manager import LogManager
from service.core.ports import PartitionRecords
from service.core.reports import explain_document, retention_document
from service.core.stray_replicas import StrayReplica
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log import PartitionLog
from service.storage.log_dir import FailedPartition
from service.storage.segment import LogSegment
from service.storage.topic_partition import TopicPartition

__all__ = ["LogManagerQueries", "TopicMetadata"]

logger = logging.getLogger(__name__)


class TopicMetadata(Protocol):
    """What the configs read of the broker's metadata log (``service.metadata.source.MetadataSource``,
    handed in by the composition root: the metadata is a layer above the core)."""

    @property
    def image(self) -> object | None:
        """The last image read; None without a metadata log."""
        ...

    @property
    def dynamic_configs(self) -> DynamicConfigs: ...

    def topic_configs_unknown(self, topic: str, *, known_to_logcleaner: bool) -> bool: ...


class LogManagerQueries:
    """``LogQueries`` over a node's parts; ``refresh`` is the daemon's topic-config refresh."""

    def __init__(
        self,
        broker: BrokerConfig,
        manager: LogManager,
        store: TopicConfigStore,
        metadata: TopicMetadata,
        *,
        refresh: Callable[[], None],
    ) -> None:
        self._broker = broker
        self._manager = manager
        self._store = store
        self._metadata = metadata
        self._refresh = refresh

    # -- partitions (PartitionReads) -------------------------------------------------------------

    def topics(self) -> dict[str, list[int]]:
        return self._manager.topics()

    def offline_partitions(self) -> list[TopicPartition]:
        return sorted(self._manager.offline_logs)

    def topic_logs(self, topic: str) -> dict[str, object]:
        partitions = self._manager.topics().get(topic, [])
        logs, offline = self._manager.logs, self._manager.offline_logs
        summaries = []
        topic_id = None
        for p in partitions:
            tp = TopicPartition(topic, p)
            log = logs.get(tp) or offline.get(tp)
            if log is None:  # deleted meanwhile
                continue
            topic_id = topic_id or log.topic_id
            with log.lock:  # figures held in memory: an offline log's are its last known
                summaries.append(
                    {
                        "partition": p,
                        "log_dir": str(log.log_dir),
                        "log_start_offset": log.log_start_offset,
                        "log_end_offset": log.log_end_offset,
                        "high_watermark": log.high_watermark,
                        "size_bytes": log.size_bytes,
                        "segments": len(log.segments),
                        "offline": tp in offline,
                    }
                )
        return {"topic_id": topic_id, "partitions": summaries}

    def partition_document(self, tp: TopicPartition) -> dict[str, object]:
        log = self._log(tp)
        checkpoint = _cleaner_checkpoint(log)
        with log.lock:
            segments = log.segments
            doc: dict[str, object] = {
                "topic": tp.topic,
                "partition": tp.partition,
                "log_dir": str(log.log_dir),
                "log_start_offset": log.log_start_offset,
                "log_end_offset": log.log_end_offset,
                "high_watermark": log.high_watermark,
                "high_watermark_source": str(log.high_watermark_source),
                "recovery_point": log.recovery_point,
                "size_bytes": log.size_bytes,
                "cleanup_policy": ",".join(sorted(log.config.cleanup_policy)),
                "dirty_ratio": round(log_to_clean(log, checkpoint, self.now_ms()).cleanable_ratio, 6),
                "cleaner_checkpoint": checkpoint,
            }
        doc["segments"] = [_segment_info(s) for s in segments]  # may read files: outside the log's lock
        return doc

    def partition(self, tp: TopicPartition) -> PartitionRecords:
        return self._log(tp)

    def now_ms(self) -> int:
        return self._manager.clock.now_ms()

    def _log(self, tp: TopicPartition) -> PartitionLog:
        """The live log of ``tp``; a missing one named as the topic or the partition that does not exist."""
        manager = self._manager
        try:
            return manager.get_log(tp)
        except NotFoundError as exc:
            strays = manager.stray_replicas
            if tp in manager.failed_partitions or any(s.topic_partition == tp for s in strays):
                raise exc from None  # names the load failure or the stray replica
            partitions = manager.topics().get(tp.topic)
            if partitions is None:
                raise NotFoundError(f"topic {tp.topic!r} does not exist") from None
            raise NotFoundError(
                f"topic {tp.topic!r} has no partition {tp.partition} (it has {len(partitions)})"
            ) from None

    # -- topics (TopicAdmin) ---------------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int) -> None:
        self._manager.create_topic(topic, partitions)
        if self._metadata.image is not None:
            logger.warning(
                "Topic %s created by logcleaner is not in the broker's metadata log: the next start holds "
                "its partitions as stray replicas, as the broker would",
                topic,
            )

    def create_partitions(self, topic: str, total: int) -> None:
        self._manager.create_partitions(topic, total)

    def delete_topic(self, topic: str) -> list[TopicPartition]:
        doomed = self._manager.delete_topic(topic)
        self._store.remove_topic(topic)
        return doomed

    # -- configs (TopicConfigs) ------------------------------------------------------------------

    def overrides(self, topic: str) -> dict[str, str]:
        return self._store.get(topic)

    def update_overrides(self, topic: str, changes: Mapping[str, str], deletes: Iterable[str] = ()) -> None:
        self._store.update(topic, dict(changes), list(deletes))

    def config_entries(self, topic: str) -> dict[str, ConfigEntry]:
        return describe_topic_config(
            self._broker,
            self._store.get(topic),
            topic=topic,
            dynamic=self._metadata.dynamic_configs,
            configs_unknown=self._metadata.topic_configs_unknown(
                topic, known_to_logcleaner=self._store.has(topic)
            ),
        )

    def refresh_topic_configs(self) -> None:
        self._refresh()

    @property
    def set_aside_config_files(self) -> list[SetAsideFile]:
        return self._store.set_aside

    # -- tasks (LogTasks) ------------------------------------------------------------------------

    def run_retention(self, *, dry_run: bool) -> dict[str, object]:
        self._refresh()
        manager = self._manager
        if dry_run:
            logs = sorted(manager.retention_logs(compacted=False), key=lambda log: log.topic_partition)
            deleted = [d for log in logs for d in manager.delete_old_segments(log, dry_run=True)]
        else:
            deleted = manager.cleanup_logs()
        return retention_document(deleted, dry_run=dry_run)

    def explain(self, *, topic: str | None, partition: int | None) -> dict[str, object]:
        return explain_document(
            self._manager,
            cleaner_enabled=self._broker.log_cleaner_enable,
            topic=topic,
            partition=partition,
            engine_choice=EngineChoice.of(self._broker),
        )

    def checkpoints(self, names: Sequence[str]) -> list[dict[str, object]]:
        return [_checkpoint_file(log_dir, name) for log_dir in self._manager.log_dirs for name in names]

    # -- log dirs (LogDirsStatus) ----------------------------------------------------------------

    @property
    def is_loaded(self) -> bool:
        return self._manager.is_loaded

    @property
    def log_dirs(self) -> list[Path]:
        return self._manager.log_dirs

    @property
    def offline_dirs(self) -> dict[Path, str]:
        return self._manager.offline_dirs

    @property
    def failed_partitions(self) -> list[FailedPartition]:
        return sorted(self._manager.failed_partitions.values(), key=lambda f: f.topic_partition)

    @property
    def stray_replicas(self) -> list[StrayReplica]:
        return self._manager.stray_replicas


def _cleaner_checkpoint(log: PartitionLog) -> int | None:
    try:
        return cleaner_checkpoints([log]).get(log.topic_partition)
    except (OSError, CorruptDataError):
        return None


def _segment_info(segment: LogSegment) -> dict[str, object]:
    try:
        largest, source = segment.largest_timestamp()
        count: int | None = segment.record_count()
    except (OSError, CorruptDataError):  # deleted or replaced while we read it
        largest, source = -1, "unknown"
        count = None
    return {
        "base_offset": segment.base_offset,
        "size_bytes": segment.size_bytes,
        "record_count": count,
        "largest_timestamp": largest,
        "largest_timestamp_source": source,
    }


def _checkpoint_file(log_dir: Path, name: str) -> dict[str, object]:
    entries: list[dict[str, object]] = []
    error = None
    try:
        checkpoint = OffsetCheckpointFile(log_dir / name).read()
        entries = [
            {"topic": tp.topic, "partition": tp.partition, "offset": offset}
            for tp, offset in sorted(checkpoint.items())
        ]
    except (OSError, CorruptDataError) as exc:
        error = str(exc)
    return {"log_dir": str(log_dir), "name": name, "entries": entries, "error": error}

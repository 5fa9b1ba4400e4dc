"""A log dir's ``replication-offset-checkpoint``: each partition's high watermark, as a broker's
``ReplicaManager.checkpointHighWatermarks`` writes it (the offset checkpoint format of ``checkpoints``).

Reading follows Kafka's start-up (``Partition.createLog``, then ``makeLeader``): a partition this node leads
alone starts at its log end (the caller says which: ``leads_alone``); any other starts at the high watermark
the file lists for it, or at 0 if it lists none (the log then holds either within its log start and end
offsets). A malformed file stops the load with an error naming the file and line, before anything in the
dir is written: guessing could let retention or the cleaner act on records the broker never acknowledged.

Writing keeps the entries of partitions logcleaner does not manage in that dir (a ``-future`` or
``-stray`` replica's, a partition that failed to load, an old entry of a partition now in another dir)
exactly as read, and writes every live log's high watermark; a partition deleted through the API leaves
the file with its log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.checkpoints import OffsetCheckpointFile, decode_checkpoint
from service.storage.high_watermark_source import HighWatermarkSource
from service.storage.log import PartitionLog
from service.storage.log_files import REPLICATION_OFFSET_CHECKPOINT
from service.storage.topic_partition import TopicPartition

__all__ = ["HighWatermarks", "read_high_watermarks", "write_high_watermark_checkpoint"]

_NOT_LISTED = 0  # Kafka's start for a partition the file does not list (then raised to the log start)


@dataclass(frozen=True, slots=True)
class HighWatermarks:
    """The high watermarks one log dir's file holds (none without the file)."""

    entries: Mapping[TopicPartition, int] = field(default_factory=dict)

    def for_partition(
        self, tp: TopicPartition, *, leads_alone: bool
    ) -> tuple[int | None, HighWatermarkSource]:
        """The high watermark ``tp`` starts at (before the log bounds it; None: its log end offset), and
        where it came from."""
        if leads_alone:
            return None, HighWatermarkSource.LEADER_LOG_END
        listed = self.entries.get(tp)
        if listed is None:
            return _NOT_LISTED, HighWatermarkSource.NO_CHECKPOINT
        return listed, HighWatermarkSource.CHECKPOINT

    def not_managed(self, managed: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The entries of partitions outside ``managed``, to be written back unchanged."""
        skip = set(managed)
        return {tp: offset for tp, offset in self.entries.items() if tp not in skip}


def read_high_watermarks(log_dir: Path) -> HighWatermarks:
    """The dir's ``replication-offset-checkpoint``; ``InvalidInputError`` naming the file and line if it is
    malformed (``OSError`` if it cannot be read)."""
    path = log_dir / REPLICATION_OFFSET_CHECKPOINT
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return HighWatermarks()
    try:
        entries = decode_checkpoint(data, path=str(path))
    except CorruptDataError as exc:
        raise InvalidInputError(
            f"{exc}; the high watermarks cannot be read, so nothing in {log_dir} is retained or cleaned: "
            "repair that line (a partition the file does not list starts at its log start offset)"
        ) from exc
    return HighWatermarks(entries)


def write_high_watermark_checkpoint(
    log_dir: Path, logs: Iterable[PartitionLog], kept: Mapping[TopicPartition, int]
) -> None:
    """Write ``kept`` (entries of partitions not managed here) and every log's high watermark, crash-safely.

    The high watermark is read from each log's published snapshot, without its lock (a retention pass may
    hold it)."""
    entries = dict(kept)
    entries.update((log.topic_partition, log.snapshot.high_watermark) for log in logs)
    OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT).write(entries)

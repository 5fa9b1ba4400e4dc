"""Where a log's high watermark came from, as ``explain`` and the partition document name it."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["HighWatermarkSource"]


class HighWatermarkSource(StrEnum):
    # This node leads the partition with no other in-sync replica (the metadata says so, or logcleaner
    # made the dir and is its only replica): the log end, as Kafka's leader sets it (``Partition.makeLeader``
    # -> ``maybeIncrementLeaderHW``). An append by logcleaner moves any log here.
    LEADER_LOG_END = "leader-log-end"
    # The log dir's ``replication-offset-checkpoint`` entry, held within the log's offsets.
    CHECKPOINT = "checkpoint"
    # A broker's partition that the checkpoint does not list (or a broker's dir without the file): Kafka's
    # start at 0, raised to the log start offset; retention and the cleaner act on nothing above it.
    NO_CHECKPOINT = "no-checkpoint"

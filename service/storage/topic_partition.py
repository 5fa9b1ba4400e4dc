"""``TopicPartition``: the key of every per-partition map (Kafka's ``TopicPartition``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TopicPartition"]


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """One partition of one topic.

    Ordered by topic, then partition, so maps keyed by it can be written in a deterministic order.
    It is a plain value and checks nothing: names are validated where they enter (a partition dir name,
    a request, a checkpoint being written).
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        """``my-topic-3``: Kafka's spelling, also the partition's directory name."""
        return f"{self.topic}-{self.partition}"

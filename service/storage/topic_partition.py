"""``TopicPartition``: the key of every per-partition map (Kafka's ``TopicPartition``)."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    """One partition of one topic.

    Ordered by topic, then partition, so maps keyed by it can be written in a deterministic order.
    It is a plain value and checks nothing: names are validated where they enter (a partition dir name,
    a request, a checkpoint being written). A named tuple, not a frozen dataclass: a start-up makes and
    hashes several per partition (checkpoints, the survey, the load), and a tuple's construction and hash
    run in C (a third of a frozen dataclass's cost, measured).
    """

    topic: str
    partition: int

    def __str__(self) -> str:
        """``my-topic-3``: Kafka's spelling, also the partition's directory name."""
        return f"{self.topic}-{self.partition}"

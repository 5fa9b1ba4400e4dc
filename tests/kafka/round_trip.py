"""Steps the round-trip tests share: read where the broker left a partition's active segment, wait for the
broker's cleaner to reach it, and say how two record lists differ. logcleaner takes each topic's configs
from the broker's metadata log, as a user pointing it at a broker's dir relies on."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.topic_partition import TopicPartition
from tests.kafka.broker import KafkaBroker
from tests.kafka.checks import segment_base_offsets
from tests.kafka.clients import ConsumedRecord

__all__ = ["active_segment_base", "differences", "wait_for_cleaner_checkpoint"]


def active_segment_base(broker: KafkaBroker, topic: str, partition: int = 0, min_segments: int = 4) -> int:
    """The base offset of the partition's active segment, once the broker is stopped: with nothing open
    and no compaction lag, the cleaner's first uncleanable offset."""
    bases = segment_base_offsets(broker.log_dir / f"{topic}-{partition}")
    assert len(bases) >= min_segments, f"{topic}-{partition}: the broker rolled too few segments: {bases}"
    return bases[-1]


def differences(expected: Sequence[ConsumedRecord], actual: Sequence[ConsumedRecord]) -> str:
    """Empty when equal; else the counts and the first records present on one side only."""
    if list(expected) == list(actual):
        return ""
    missing = [r for r in expected if r not in actual][:3]
    extra = [r for r in actual if r not in expected][:3]
    return f"expected {len(expected)} records, got {len(actual)}; missing {missing}; unexpected {extra}"


def wait_for_cleaner_checkpoint(
    log_dir: Path, ends: Mapping[TopicPartition, int], timeout_s: float = 90.0
) -> None:
    """Until the broker's cleaner-offset-checkpoint reaches each partition's end offset, which Kafka writes
    when a cleaning round is done (``LogCleanerManager.doneCleaning``)."""
    checkpoint = OffsetCheckpointFile(log_dir / "cleaner-offset-checkpoint")
    deadline = time.monotonic() + timeout_s
    while True:
        found = checkpoint.read() if checkpoint.path.exists() else {}
        reached = {tp: found.get(tp) for tp in ends}
        if reached == dict(ends):
            return
        assert time.monotonic() < deadline, f"the broker's cleaner got to {reached}, not {dict(ends)}"
        time.sleep(0.2)

"""What ``gen``'s coordinator workloads share: the partition a group or transactional id lives in, the
order a coordinator appends its records in, and the compacted topic they go to.

A coordinator serves its owners (consumer groups, transactional ids) at once: each owner's records come as
a sequence of batches, and the partition's owners interleave, step by step (step 0 is every owner's first
batch, then each one's second, and so on). Steps are stamped evenly over the workload's time range, first
to last, so a partition's timestamps never go back; a batch's values may carry its timestamp (a commit
time, a transaction's last update), so a batch is made from it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from service.base.clock import Clock
from service.shell.tools.workload_dir import GenResult, write_workload
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition

__all__ = [
    "Batch",
    "CoordinatorWorkload",
    "Pair",
    "coordinator_partition",
    "fixed_batch",
    "generate_coordinator_topic",
]

Pair = tuple[bytes, bytes | None]  # a record's key and value (None: a tombstone)
Batch = Callable[[int], list[Pair]]  # a batch's records, given its timestamp in ms


class CoordinatorWorkload(Protocol):
    """A coordinator's workload: its owners, and the batches it writes for each."""

    @property
    def log_dir(self) -> Path: ...
    @property
    def partitions(self) -> int: ...
    @property
    def timestamp_start_ms(self) -> int | None: ...
    @property
    def timestamp_spread_ms(self) -> int: ...
    @property
    def segment_bytes(self) -> int: ...
    @property
    def seed(self) -> int: ...

    def owners(self) -> list[str]: ...

    def batches(self, index: int, owner: str, rng: random.Random) -> list[Batch]:
        """The batches of owner number ``index``, in order (``rng``: its partition's random stream)."""
        ...


def generate_coordinator_topic(
    topic: str, workload: CoordinatorWorkload, *, clock: Clock | None = None
) -> list[GenResult]:
    """Write ``workload`` into every partition of ``topic``, a compacted topic, each owner into its
    coordinator partition, the owners of a partition in step; existing partitions are appended to."""
    config = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=workload.segment_bytes)
    overrides = {"cleanup.policy": "compact", "segment.bytes": str(workload.segment_bytes)}
    owners: dict[int, list[tuple[int, str]]] = {}  # per partition: its owners, with their indexes
    for index, owner in enumerate(workload.owners()):
        owners.setdefault(coordinator_partition(owner, workload.partitions), []).append((index, owner))

    def fill(log: PartitionLog, now_ms: int) -> GenResult:
        partition = log.topic_partition.partition
        spread = workload.timestamp_spread_ms
        start_ms = now_ms - spread if workload.timestamp_start_ms is None else workload.timestamp_start_ms
        rng = random.Random(f"{workload.seed}/{partition}")
        per_owner = [workload.batches(index, owner, rng) for index, owner in owners.get(partition, [])]
        records = _append_in_steps(log, per_owner, start_ms, spread)
        return GenResult(topic, partition, records, log.log_end_offset, len(log.segments), log.size_bytes)

    targets = [TopicPartition(topic, p) for p in range(workload.partitions)]
    return write_workload(workload.log_dir, targets, config, overrides, fill, clock=clock)


def coordinator_partition(owner: str, partitions: int) -> int:
    """The coordinator partition of a group or transactional id: Kafka's ``Utils.abs(id.hashCode()) % n``
    (Java's String hash)."""
    hash_code = 0
    for unit in _utf16_units(owner):
        hash_code = (31 * hash_code + unit) & 0xFFFFFFFF
    if hash_code >= 1 << 31:
        hash_code -= 1 << 32
    magnitude = 0 if hash_code == -(1 << 31) else abs(hash_code)
    return magnitude % partitions


def _utf16_units(text: str) -> list[int]:
    raw = text.encode("utf-16-be")
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


def fixed_batch(pairs: list[Pair]) -> Batch:
    """A batch whose records do not depend on its timestamp."""
    return lambda _timestamp_ms: pairs


def _append_in_steps(
    log: PartitionLog, per_owner: Sequence[Sequence[Batch]], start_ms: int, spread_ms: int
) -> int:
    """Append every owner's batches, the owners in step (see the module docstring); the record count."""
    last_step = max((len(batches) - 1 for batches in per_owner), default=0)
    records = 0
    for step in range(last_step + 1):
        timestamp = start_ms + spread_ms * step // max(last_step, 1)
        for batches in per_owner:
            if step < len(batches):
                pairs = batches[step](timestamp)
                log.append_records([Record(0, timestamp, key, value) for key, value in pairs])
                records += len(pairs)
    return records

"""``logcleaner gen --workload consumer-offsets``: a ``__consumer_offsets`` topic as a group coordinator
writes it, for the decoders and the cleaner to work on.

Each consumer group lives in the partition Kafka's coordinator gives it (``abs(groupId.hashCode()) %
partitions``, Java's String hash). Per group, in time order (the groups of a partition interleaved):

1. a rebalance: its GroupMetadataValue (v3, generation 1, one member of the ``consumer`` protocol with
   its subscription and assignment, encoded as Kafka's ConsumerProtocol v0);
2. ``commits`` rounds of offset commits, one batch per round with one OffsetCommitValue (v3) per
   topic-partition the group consumes; the offsets grow each round;
3. a second rebalance (generation 2) after the last round;
4. for an expired group (``expired_groups`` of them, spread evenly): a batch of tombstones, one for each
   of its offset keys and one for its group key, as the coordinator writes when offsets expire.

Keys are the coordinator's, so one (group, topic, partition) always has the same key and compaction
leaves only its newest commit; tombstones go once ``delete.retention.ms`` has passed.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from service.base.clock import Clock
from service.base.errors import InvalidInputError
from service.shell.tools.coordinator_steps import Batch, Pair, fixed_batch, generate_coordinator_topic
from service.shell.tools.workload_dir import GenResult, is_chosen
from service.storage.coordinator_records import (
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_VALUE,
    encode_group_metadata_key,
    encode_offset_commit_key,
    encode_versioned,
)

__all__ = [
    "CONSUMER_OFFSETS_TOPIC",
    "OffsetsWorkload",
    "OFFSETS_SEGMENT_BYTES",
    "generate_consumer_offsets",
]

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_SEGMENT_BYTES = 104_857_600  # Kafka's offsets.topic.segment.bytes
VALUE_VERSION = 3  # what Kafka 2.1-3.x write for offset commits and group metadata
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_SESSION_TIMEOUT_MS = 45_000
_REBALANCE_TIMEOUT_MS = 300_000


@dataclass(frozen=True, slots=True)
class OffsetsWorkload:
    """What to write: ``groups`` groups, each consuming ``topics`` × ``topic_partitions`` partitions."""

    log_dir: Path
    partitions: int = 1
    groups: int = 10
    topics: int = 3
    topic_partitions: int = 4
    commits: int = 5
    expired_groups: float = 0.0
    timestamp_start_ms: int | None = None
    timestamp_spread_ms: int = 0
    segment_bytes: int = OFFSETS_SEGMENT_BYTES
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("partitions", "groups", "topics", "topic_partitions", "commits"):
            if getattr(self, name) < 1:
                raise InvalidInputError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.expired_groups <= 1.0:
            raise InvalidInputError(f"expired_groups is a fraction in [0, 1], got {self.expired_groups}")

    def owners(self) -> list[str]:
        return [f"group-{i}" for i in range(self.groups)]

    def batches(self, index: int, owner: str, rng: random.Random) -> list[Batch]:
        return _group_batches(self, owner, is_chosen(index, self.expired_groups), rng)


def generate_consumer_offsets(workload: OffsetsWorkload, *, clock: Clock | None = None) -> list[GenResult]:
    """Write ``workload`` into every partition of ``__consumer_offsets`` as a group coordinator would."""
    return generate_coordinator_topic(CONSUMER_OFFSETS_TOPIC, workload, clock=clock)


def _group_batches(
    workload: OffsetsWorkload, group: str, is_expired: bool, rng: random.Random
) -> list[Batch]:
    """The batches one group's coordinator writes, in order (the module docstring's steps)."""
    topics = [f"topic-{t}" for t in range(workload.topics)]
    partitions = [(t, p) for t in topics for p in range(workload.topic_partitions)]
    group_key = encode_group_metadata_key(group)
    batches = [fixed_batch([(group_key, _group_metadata(group, 1, topics, partitions))])]
    offsets = dict.fromkeys(partitions, 0)
    for _ in range(workload.commits):
        commits: list[tuple[bytes, int]] = []
        for topic, partition in partitions:
            offsets[topic, partition] += 1 + int(rng.random() * 1000)
            commits.append((encode_offset_commit_key(group, topic, partition), offsets[topic, partition]))
        batches.append(partial(_offset_commits, commits))
    batches.append(fixed_batch([(group_key, _group_metadata(group, 2, topics, partitions))]))
    if is_expired:
        tombstones: list[Pair] = [(encode_offset_commit_key(group, t, p), None) for t, p in partitions]
        batches.append(fixed_batch([*tombstones, (group_key, None)]))
    return batches


def _offset_commits(commits: list[tuple[bytes, int]], timestamp_ms: int) -> list[Pair]:
    """A round's OffsetCommitValues, committed at the batch's time, as the coordinator stamps them."""
    return [
        (key, encode_versioned(OFFSET_COMMIT_VALUE, VALUE_VERSION, _offset_commit(offset, timestamp_ms)))
        for key, offset in commits
    ]


def _offset_commit(offset: int, timestamp_ms: int) -> dict[str, object]:
    return {"offset": offset, "leader_epoch": 0, "metadata": "", "commit_timestamp": timestamp_ms}


def _group_metadata(
    group: str, generation: int, topics: list[str], partitions: list[tuple[str, int]]
) -> bytes:
    member_id = f"consumer-{group}-1-{generation:08d}"
    member = {
        "member_id": member_id,
        "group_instance_id": None,
        "client_id": f"consumer-{group}-1",
        "client_host": "/10.0.0.1",
        "rebalance_timeout": _REBALANCE_TIMEOUT_MS,
        "session_timeout": _SESSION_TIMEOUT_MS,
        "subscription": _subscription(topics),
        "assignment": _assignment(topics, partitions),
    }
    values = {
        "protocol_type": "consumer",
        "generation": generation,
        "protocol": "range",
        "leader": member_id,
        "current_state_timestamp": -1,
        "members": [member],
    }
    return encode_versioned(GROUP_METADATA_VALUE, VALUE_VERSION, values)


def _string(text: str) -> bytes:
    raw = text.encode()
    return _INT16.pack(len(raw)) + raw


def _subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: int16 version, [string] topics, bytes user data (null)."""
    return _INT16.pack(0) + _INT32.pack(len(topics)) + b"".join(map(_string, topics)) + _INT32.pack(-1)


def _assignment(topics: list[str], partitions: list[tuple[str, int]]) -> bytes:
    """ConsumerProtocolAssignment v0: int16 version, [topic, [int32]] partitions, bytes user data (null)."""
    out = _INT16.pack(0) + _INT32.pack(len(topics))
    for topic in topics:
        owned = [p for t, p in partitions if t == topic]
        out += _string(topic) + _INT32.pack(len(owned)) + b"".join(_INT32.pack(p) for p in owned)
    return out + _INT32.pack(-1)

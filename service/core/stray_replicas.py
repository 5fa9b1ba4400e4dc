"""Which partition dirs are stray replicas: logs that are not this topic's, which logcleaner leaves alone.

Kafka (``LogManager.loadLog``, ``LogManager.isStrayKraftReplica``) treats a log as stray when the broker's
metadata says it should not be here: its topic is not in the metadata, its topic id is not the topic's
(an older incarnation of a re-created topic), or the partition is not assigned to this broker. The broker
renames such a dir ``<topic>-<partition>.<uuid>-stray`` and never deletes it by itself. logcleaner never
retains, cleans, deletes or renames a stray replica, and lists it.

:func:`find_stray_replicas` is the one entry point. Given what the broker's metadata knows
(:class:`KnownTopics`), it decides as Kafka does. Without it, a topic's id is the one most of its
partition dirs share (``partition.metadata``): a partition dir with another id is stray; when no id leads
(a 1-1 split), every partition dir of the topic that carries an id is held as stray, untouched, since
nothing says which incarnation is the live one. A partition dir without ``partition.metadata`` gives no
id and is stray only by the metadata's rules.
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.log_files import METADATA_TOPIC, parse_partition_dir_name
from service.storage.partition_metadata import PARTITION_METADATA_FILE, decode_partition_metadata
from service.storage.prescan import read_partition_metadata_files
from service.storage.topic_partition import TopicPartition

__all__ = [
    "KnownTopics",
    "ReplicaDir",
    "StrayReplica",
    "find_stray_replicas",
    "stray_reason",
    "survey_replica_dirs",
    "unmanaged_partitions",
]

logger = logging.getLogger(__name__)


class ReplicaDir(NamedTuple):
    """A partition dir ``name`` found in ``log_dir``; ``kind`` is ``""`` (a live name), ``"future"`` or
    ``"stray"``."""

    topic_partition: TopicPartition
    log_dir: Path
    name: str
    kind: str
    topic_id: str | None = None  # of partition.metadata; None without (or with an unreadable) one

    @property
    def path(self) -> Path:
        return self.log_dir / self.name


@dataclass(frozen=True, slots=True)
class KnownTopics:
    """What the broker's metadata knows: each topic's id, and (when known) the partitions of this broker and
    those it leads with no other in-sync replica (``led_alone``: their high watermark is their log end)."""

    topic_ids: Mapping[str, str]
    assigned: Collection[TopicPartition] | None = None  # None: the assignment is not known
    removed: Mapping[str, str] = field(default_factory=dict)  # deleted topics (RemoveTopicRecord): their ids
    led_alone: Collection[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class StrayReplica:
    topic_partition: TopicPartition
    path: Path
    topic_id: str | None
    reason: str

    @property
    def log_dir(self) -> Path:
        return self.path.parent


def survey_replica_dirs(
    log_dirs: Iterable[Path],
    early: Callable[[Path], Mapping[str, bytes | None] | None] | None = None,
    surveys: Callable[[str], bool] | None = None,
) -> list[ReplicaDir]:
    """Every live, ``-future`` and ``-stray`` partition dir of ``log_dirs`` with its topic id (``-delete``
    dirs and names that are not partition dirs are left out). Reads, never writes; a log dir that cannot
    be listed raises ``OSError`` (its load takes it offline).

    The ``partition.metadata`` files (one a partition dir: the survey's cost) are read in C with the GIL
    released where it is built; ``early``: a log dir's files already read under its lock (``serve``'s
    ``EarlyPrescans.partition_metadata``, read beside the imports), or None. ``surveys``: the topics whose
    dirs are surveyed (None: all), for an inspection's share (``PartitionCopier.surveys``)."""
    found = []
    for log_dir in log_dirs:
        prefix = os.path.join(log_dir, "")  # strings, not a Path per dir: a start-up lists every partition
        with os.scandir(log_dir) as entries:
            names = sorted(e.name for e in entries if e.is_dir())
        parsed_names = []
        for name in names:
            try:
                parsed = parse_partition_dir_name(name)
            except InvalidInputError:
                continue
            if parsed.kind == "delete" or parsed.topic == METADATA_TOPIC:  # the metadata log is the broker's
                continue
            if surveys is not None and not surveys(parsed.topic):
                continue
            parsed_names.append((name, parsed))
        files = early(log_dir) if early is not None else None
        if files is None:
            files = read_partition_metadata_files(log_dir, [name for name, _ in parsed_names])
        for name, parsed in parsed_names:
            tp = TopicPartition(parsed.topic, parsed.partition)
            if files is not None and name in files:
                topic_id = _topic_id_in(files[name], prefix + name)
            else:
                topic_id = _topic_id_of(prefix + name)
            found.append(ReplicaDir(tp, log_dir, name, parsed.kind, topic_id))
    return found


# The file as Kafka's ``PartitionMetadataFile`` writes it: taken without a full parse (a start-up reads one
# per partition dir); any other content goes through ``decode_partition_metadata``.
_KAFKA_WRITTEN = re.compile(rb"version: 0\ntopic_id: ([A-Za-z0-9_-]{22})")
_MAX_READ_BYTES = 4096


def _topic_id_of(directory: str) -> str | None:
    path = os.path.join(directory, PARTITION_METADATA_FILE)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None  # none (no id to compare), or unreadable: the partition's own load reports it
    try:
        data = os.read(fd, _MAX_READ_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _topic_id_in(data, directory)


def _topic_id_in(data: bytes | None, directory: str) -> str | None:
    """The topic id of ``directory``'s ``partition.metadata`` bytes (None: no file, or unreadable)."""
    if data is None:
        return None
    match = _KAFKA_WRITTEN.fullmatch(data)
    if match is not None:
        return match.group(1).decode("ascii")
    path = os.path.join(directory, PARTITION_METADATA_FILE)
    try:
        return decode_partition_metadata(data, path=path).topic_id
    except CorruptDataError as exc:
        logger.warning("%s: no topic id to compare with the topic's other partitions", exc)
        return None


def find_stray_replicas(
    replicas: Iterable[ReplicaDir], known: KnownTopics | None = None
) -> list[StrayReplica]:
    """The stray replicas among ``replicas`` (``-future`` dirs are never stray here: they are the broker's
    moves between log dirs), each with why. ``known``: the broker's metadata, which then decides alone."""
    strays = []
    live: dict[str, list[ReplicaDir]] = {}
    for replica in replicas:
        if replica.kind == "stray":
            reason = "renamed -stray by the broker: its replica is not this topic's (Kafka keeps it)"
            strays.append(StrayReplica(replica.topic_partition, replica.path, replica.topic_id, reason))
        elif replica.kind == "":
            live.setdefault(replica.topic_partition.topic, []).append(replica)
    for topic, dirs in sorted(live.items()):
        for replica, reason in _strays_of_topic(topic, dirs, known):
            strays.append(StrayReplica(replica.topic_partition, replica.path, replica.topic_id, reason))
    return sorted(strays, key=lambda s: (s.topic_partition.topic, s.topic_partition.partition, str(s.path)))


def _strays_of_topic(
    topic: str, dirs: list[ReplicaDir], known: KnownTopics | None
) -> list[tuple[ReplicaDir, str]]:
    if known is not None:
        return [(d, reason) for d in dirs if (reason := _stray_by_metadata(d, known)) is not None]
    votes = Counter(d.topic_id for d in dirs if d.topic_id is not None)
    if len(votes) < 2:
        return []
    ranked = votes.most_common()
    shares = ", ".join(f"{topic_id}: {count}" for topic_id, count in ranked)
    if ranked[0][1] == ranked[1][1]:
        reason = (
            f"topic {topic!r} has partition dirs of different topic ids and none leads ({shares}); every "
            "partition dir of the topic is held until the broker's metadata (or an operator) decides"
        )
        return [(d, reason) for d in dirs if d.topic_id is not None]
    topic_id, count = ranked[0]
    return [
        (
            d,
            f"topic id {d.topic_id} is not the topic's {topic_id}, which {count} of its "
            f"{sum(votes.values())} partition dirs carry ({shares}): a replica of another incarnation",
        )
        for d in dirs
        if d.topic_id is not None and d.topic_id != topic_id
    ]


def stray_reason(replica: ReplicaDir, known: KnownTopics) -> str | None:
    """Why the broker's metadata says ``replica`` should not be here, or None; logs nothing (a daemon
    asks this of its live logs when the metadata changes)."""
    return _stray_by_metadata(replica, known)


def _stray_by_metadata(replica: ReplicaDir, known: KnownTopics) -> str | None:
    """Kafka's ``isStrayKraftReplica``: why the metadata says this replica should not be here, or None."""
    topic = replica.topic_partition.topic
    topic_id = known.topic_ids.get(topic)
    if replica.topic_id is None:
        return "its partition dir has no topic id (partition.metadata), which Kafka treats as stray"
    if topic_id is None and topic in known.removed:
        return (
            f"topic {topic!r} was deleted in the broker's metadata (RemoveTopicRecord, topic id "
            f"{known.removed[topic]}): reported, never deleted by logcleaner"
        )
    if topic_id is None:
        return f"topic {topic!r} is not in the broker's metadata"
    if replica.topic_id != topic_id:
        return f"topic id {replica.topic_id} is not the topic's {topic_id} in the broker's metadata"
    if known.assigned is not None and replica.topic_partition not in known.assigned:
        return "the broker's metadata does not assign this partition to this broker"
    return None


def unmanaged_partitions(
    log_dir: Path, replicas: Iterable[ReplicaDir], strays: Iterable[StrayReplica]
) -> frozenset[TopicPartition]:
    """The partitions of ``log_dir``'s logs that logcleaner does not manage: its ``-future`` replicas (the
    broker's, being moved in) and its stray replicas. Their checkpoint lines are carried over by every
    writer, and their recovery is left to the broker."""
    futures = {r.topic_partition for r in replicas if r.kind == "future" and r.log_dir == log_dir}
    return frozenset(futures | {s.topic_partition for s in strays if s.log_dir == log_dir})

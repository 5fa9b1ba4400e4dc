"""File and directory names of Kafka's on-disk layout, in one place (Kafka ``LogFileUtils``).

Segment files are named by their base offset, zero-padded to 20 digits, plus a suffix; temporary states
append a second suffix (``00000000000000000000.log.cleaned``). Partition dirs are ``<topic>-<partition>``,
with ``.<uuid>-delete`` / ``-future`` / ``-stray`` for the transient kinds.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import NamedTuple

from service.base.errors import CorruptDataError, InvalidInputError

__all__ = [
    "CLEANED_SUFFIX",
    "CLEAN_SHUTDOWN_FILE",
    "CLEANER_OFFSET_CHECKPOINT",
    "DELETED_SUFFIX",
    "DELETE_DIR_SUFFIX",
    "FUTURE_DIR_SUFFIX",
    "INDEX_SUFFIX",
    "INDEX_SUFFIXES",
    "LOCK_FILE",
    "LOG_START_OFFSET_CHECKPOINT",
    "LOG_SUFFIX",
    "METADATA_TOPIC",
    "METADATA_TOPIC_CREATION_PROHIBITED",
    "OFFSET_WIDTH",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "SNAPSHOT_SUFFIX",
    "STRAY_DIR_SUFFIX",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "PartitionDirName",
    "base_offset_from_name",
    "file_name",
    "is_valid_topic_name",
    "parse_partition_dir_name",
    "partition_dir_name",
    "segment_file_base_offset",
    "segment_path",
]

OFFSET_WIDTH = 20

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)  # a segment's files beside its .log
SNAPSHOT_SUFFIX = ".snapshot"

DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # the high watermarks (ReplicaManager's)
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES_FILE = "meta.properties"  # a broker writes it into every log dir it opens (MetaProperties)
LOCK_FILE = ".lock"

# KRaft's metadata log (``KafkaRaftServer.MetadataTopic``): its partition dir belongs to the broker's Raft
# layer, and Kafka's LogManager leaves every dir of this topic alone.
METADATA_TOPIC = "__cluster_metadata"
# Kafka's answer to a CreateTopics request for it (``ControllerApis``, ``INVALID_REQUEST``).
METADATA_TOPIC_CREATION_PROHIBITED = f"Creation of internal topic {METADATA_TOPIC} is prohibited."

_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # fullmatch: "$" would also match before a final "\n"


def file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000000042.log`` for base offset 42 and suffix ``.log``."""
    return str(base_offset).zfill(OFFSET_WIDTH) + suffix  # zfill keeps a sign first, as "%020d" does


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / file_name(base_offset, suffix)


def base_offset_from_name(name: str) -> int:
    """The leading offset of a segment-related file name (``00000000000000000042.log.swap`` → 42)."""
    digits = name.split(".", 1)[0]
    if not (digits.isascii() and digits.isdigit()):  # str.isdigit alone also takes "²", which int() rejects
        raise InvalidInputError(f"file name {name!r} does not start with a base offset")
    return int(digits)


def segment_file_base_offset(directory: Path, name: str) -> int:
    """``base_offset_from_name`` of a file a load met in ``directory``: a name that does not start with a
    base offset fails the partition's load (``CorruptDataError`` naming the file)."""
    try:
        return base_offset_from_name(name)
    except InvalidInputError as exc:
        raise CorruptDataError(
            f"file name {name!r} does not start with a base offset: not a segment file",
            path=str(directory / name),
        ) from exc


def is_valid_topic_name(topic: str) -> bool:
    """Kafka's rule: 1-249 of ``[a-zA-Z0-9._-]``, and not ``.`` or ``..``."""
    return _TOPIC_RE.fullmatch(topic) is not None and topic not in (".", "..")


class PartitionDirName(NamedTuple):
    topic: str
    partition: int
    kind: str  # "" for a live log, else "delete", "future" or "stray"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


@functools.lru_cache(maxsize=1 << 18)
def parse_partition_dir_name(name: str) -> PartitionDirName:
    """Parse a partition dir name by Kafka's rules (``UnifiedLog.parseTopicPartitionName``).

    ``-delete``/``-future``/``-stray`` names lose everything from their last ``.``; the partition is
    after the last ``-``; the topic is everything before it. The answers (immutable) are kept: a start-up
    or an inspection parses every partition dir's name three times (its shares, the stray-replica survey,
    the load), and an inspection's forked processes inherit what their parent parsed.
    """
    kind = ""
    stem = name
    for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX):
        if name.endswith(suffix):
            kind = suffix[1:]
            dot = name.rfind(".")
            if dot < 0:
                raise InvalidInputError(f"{name!r} ends in {suffix} but has no '.<uuid>' part")
            stem = name[:dot]
            break
    dash = stem.rfind("-")
    if dash <= 0 or dash == len(stem) - 1:
        raise InvalidInputError(f"{name!r} is not a partition dir name: expected <topic>-<partition>")
    topic, partition_text = stem[:dash], stem[dash + 1 :]
    if not (partition_text.isascii() and partition_text.isdigit()):
        raise InvalidInputError(f"{name!r}: partition {partition_text!r} is not a non-negative integer")
    return PartitionDirName(topic=topic, partition=int(partition_text), kind=kind)

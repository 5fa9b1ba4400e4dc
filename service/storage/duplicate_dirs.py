"""Kafka's refusal of a partition held by two dirs (``LogManager.loadLog``), made before anything loads.

A broker that failed while it moved a replica between log dirs (the future replica renamed over the
current one) can leave the same partition in two log dirs; ``t-007`` beside ``t-7`` names one partition
twice too (Kafka parses the partition with ``Integer.parseInt``). Kafka then refuses to start. Loading one
copy and dropping the other would run retention and the checkpoints on a copy picked by listing order,
and forget the other's checkpoint entries: data loss. So the whole set of log dirs is listed first, and
a duplicate stops the start-up or the offline command before any lock, marker, checkpoint or segment is
touched. A ``-future`` dir beside its current one is legal (a replica being moved); two futures of one
partition are not. ``-delete`` and ``-stray`` dirs may repeat: Kafka sets them aside before the check.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from pathlib import Path

from service.base.errors import DuplicatePartitionDirError, InvalidInputError
from service.storage.log_files import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    METADATA_TOPIC,
    STRAY_DIR_SUFFIX,
    parse_partition_dir_name,
)
from service.storage.topic_partition import TopicPartition

__all__ = ["check_no_duplicate_partition_dirs"]

_REPLICA_SUFFIXES = (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)
_Entry = tuple[Path, str]  # a partition dir: its log dir and its name


def check_no_duplicate_partition_dirs(log_dirs: Iterable[Path], *, strays: Collection[Path] = ()) -> None:
    """Raise ``DuplicatePartitionDirError`` naming the first partition (in topic-partition order) held by
    two dirs of ``log_dirs``; a log dir that cannot be listed is left to the load, which reports it. The
    ``strays`` (stray replicas' dirs) are no duplicates: Kafka's ``loadLog`` sets them aside first.

    One listing per log dir and a string key per name, with no ``Path`` and no full parse per name: the
    check costs about one more listing of each dir (≈ 20 ms at 10,000 partitions)."""
    set_aside = {(path.parent, path.name) for path in strays}
    seen: dict[str, _Entry] = {}  # partition key → the first dir holding it
    duplicates: list[tuple[_Entry, _Entry]] = []
    for log_dir in log_dirs:
        try:
            with os.scandir(log_dir) as entries:
                names = [entry.name for entry in entries if entry.is_dir()]
        except OSError:
            continue
        for name in names:
            key = _partition_key(name)
            if key is None or (set_aside and (log_dir, name) in set_aside):
                continue
            previous = seen.setdefault(key, (log_dir, name))
            if previous != (log_dir, name):
                same_dir = previous[0] == log_dir and name < previous[1]  # named in a stable order
                duplicates.append(((log_dir, name), previous) if same_dir else (previous, (log_dir, name)))
    if duplicates:
        first, second = min(duplicates, key=lambda duplicate: _topic_partition(duplicate[0][1]))
        raise _duplicate_error(first[0] / first[1], second[0] / second[1])


def _partition_key(name: str) -> str | None:
    """``<topic>-<partition>`` for a current replica's dir, ``<topic>-<partition> future`` for a future
    one (the partition without leading zeros: Kafka parses it with ``Integer.parseInt``); None for a dir
    that may repeat (``-delete``, ``-stray``), the metadata log's and a name that is no partition dir."""
    if name.endswith(_REPLICA_SUFFIXES):
        if not name.endswith(FUTURE_DIR_SUFFIX):
            return None
        try:
            parsed = parse_partition_dir_name(name)
        except InvalidInputError:
            return None
        return None if parsed.topic == METADATA_TOPIC else f"{parsed.topic}-{parsed.partition} future"
    dash = name.rfind("-")
    digits = name[dash + 1 :]
    if dash <= 0 or not (digits.isascii() and digits.isdigit()) or name[:dash] == METADATA_TOPIC:
        return None
    return name if digits[0] != "0" or digits == "0" else f"{name[: dash + 1]}{int(digits)}"


def _topic_partition(name: str) -> TopicPartition:
    parsed = parse_partition_dir_name(name)
    return TopicPartition(parsed.topic, parsed.partition)


def _duplicate_error(first: Path, second: Path) -> DuplicatePartitionDirError:
    """Kafka's words (``LogManager.loadLog``), with both dirs named and nothing changed."""
    tp = _topic_partition(first.name)
    if first.name.endswith(FUTURE_DIR_SUFFIX):
        message = f"Duplicate log directories found: {first}, {second}"
    else:
        message = (
            f"Duplicate log directories for {tp} are found in both {first} and {second}. "
            "It is likely because log directory failure happened while broker was replacing current "
            "replica with future replica. "
            "Recover broker from this failure by manually deleting one of the two directories for this "
            "partition. It is recommended to delete the partition in the log directory that is known to "
            "have failed recently."
        )
    return DuplicatePartitionDirError(
        f"{message} Nothing was loaded or changed.",
        topic=tp.topic,
        partition=tp.partition,
        paths=(str(first), str(second)),
    )

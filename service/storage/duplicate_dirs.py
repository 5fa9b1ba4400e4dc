"""Kafka's refusal of a partition held by two dirs (``LogManager.loadLog``), made before anything loads.

A broker that failed while it moved a replica between log dirs (the future replica renamed over the
current one) can leave the same partition in two log dirs; ``t-007`` beside ``t-7`` names one partition
twice too (Kafka parses the partition with ``Integer.parseInt``). Kafka then refuses to start. Loading one
copy and dropping the other would run retention and the checkpoints on a copy picked by listing order,
and forget the other's checkpoint entries: data loss. So the whole set of log dirs is listed first, and
a duplicate stops the start-up or the offline command before any lock, marker, checkpoint or segment is
touched. A ``-future`` dir beside its current one is legal (a replica being moved); two futures of one
partition are not. ``-delete`` and ``-stray`` dirs may repeat: Kafka loads them only to delete them.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from pathlib import Path

from service.errors import DuplicatePartitionDirError, InvalidInputError
from service.storage.log_files import METADATA_TOPIC, parse_partition_dir_name
from service.storage.topic_partition import TopicPartition

__all__ = ["check_no_duplicate_partition_dirs"]

_CHECKED_KINDS = ("", "future")  # current and future replicas: one of each per partition at most


def check_no_duplicate_partition_dirs(log_dirs: Iterable[Path], *, strays: Collection[Path] = ()) -> None:
    """Raise ``DuplicatePartitionDirError`` naming the first partition (in topic-partition order) held by
    two dirs of ``log_dirs``; a log dir that cannot be listed is left to the load, which reports it. The
    ``strays`` (stray replicas' dirs) are no duplicates: Kafka's ``loadLog`` sets them aside first."""
    seen: dict[tuple[TopicPartition, str], Path] = {}
    duplicates: list[tuple[TopicPartition, str, Path, Path]] = []
    for log_dir in log_dirs:
        try:
            with os.scandir(log_dir) as entries:
                names = sorted(entry.name for entry in entries if entry.is_dir())
        except OSError:
            continue
        for name in names:
            try:
                parsed = parse_partition_dir_name(name)
            except InvalidInputError:
                continue  # the load skips it, with a warning
            if (
                parsed.kind not in _CHECKED_KINDS
                or parsed.topic == METADATA_TOPIC
                or log_dir / name in strays
            ):
                continue
            key = (TopicPartition(parsed.topic, parsed.partition), parsed.kind)
            previous = seen.setdefault(key, log_dir / name)
            if previous != log_dir / name:
                duplicates.append((*key, previous, log_dir / name))
    if duplicates:
        tp, kind, first, second = min(duplicates, key=lambda d: d[0])
        raise _duplicate_error(tp, kind, first, second)


def _duplicate_error(tp: TopicPartition, kind: str, first: Path, second: Path) -> DuplicatePartitionDirError:
    """Kafka's words (``LogManager.loadLog``), with both dirs named and nothing changed."""
    if kind:
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

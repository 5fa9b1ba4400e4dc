"""The whole-broker summary (``logcleaner explain --summary``, ``GET /v1/explain/summary``): every byte of
every partition dir's segments under one reason (``service.core.held_bytes``), what retention would delete
now, and what cleaning would free.

``summary_parts`` gathers the parts of one LogManager (a share of an offline inspection, or the daemon's);
``unloaded_dir_parts`` the ``-delete`` and ``-future`` dirs of the log dirs, which no LogManager loads;
``summary_document`` adds them up. Both faces build the document with these, so it cannot drift apart.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from service.core.cleanable import cleaner_checkpoints
from service.core.held_bytes import (
    FUTURE_REPLICA,
    PENDING_DELETE,
    STRAY,
    UNREADABLE,
    PartitionBytes,
    partition_bytes,
)
from service.core.log_manager import LogManager
from service.storage.largest_timestamps import read_largest_timestamps
from service.storage.log import LogSnapshot, PartitionLog
from service.storage.log_config import LogConfig
from service.storage.log_files import LOG_SUFFIX, parse_partition_dir_name
from service.storage.segment import LogSegment
from service.storage.topic_partition import TopicPartition

__all__ = ["MEMO_MAX_AGE_MS", "PartitionMemo", "summary_document", "summary_parts", "unloaded_dir_parts"]

JsonDoc = dict[str, object]
TOP_PARTITIONS = 5  # per reason, the largest partitions named
MEMO_MAX_AGE_MS = 60_000  # a partition unchanged this long is figured again: time alone moves verdicts


@dataclass(slots=True)
class PartitionMemo:
    """A partition's figures and what they were computed from (``summary_parts``' ``memo``)."""

    inputs: tuple[object, ...]
    computed_ms: int
    part: PartitionBytes


def summary_parts(
    manager: LogManager,
    *,
    cleaner_enabled: bool,
    uncleanable: Collection[TopicPartition] = (),
    on_unreadable: Callable[[Path, Exception], None] | None = None,
    memo: dict[TopicPartition, PartitionMemo] | None = None,
) -> list[PartitionBytes]:
    """The loaded logs', stray replicas', failed partitions' and offline log dirs' bytes by reason.

    A log whose figures cannot be read (an index gone with a deleted segment, an I/O error) counts under
    ``unreadable`` with the error, never failing the summary. ``memo`` (the daemon's, kept between
    refreshes): a log whose snapshot, config, checkpoint and holds are those of its figures, computed
    less than ``MEMO_MAX_AGE_MS`` ago, keeps them (an append, a roll, a retention pass or a cleaning
    round publishes a new snapshot)."""
    logs = list(manager.logs.values())
    checkpoints = cleaner_checkpoints(logs, on_unreadable=on_unreadable or _ignore)
    now_ms = manager.clock.now_ms()
    memo = {} if memo is None else memo
    known: dict[TopicPartition, PartitionBytes] = {}
    stale: list[tuple[PartitionLog, _Inputs]] = []
    for log in logs:
        tp = log.topic_partition
        inputs = _Inputs(
            log.snapshot, log.config, checkpoints.get(tp), manager.has_future_replica(tp), tp in uncleanable
        )
        remembered = memo.get(tp)
        if remembered and remembered.inputs == inputs and now_ms - remembered.computed_ms < MEMO_MAX_AGE_MS:
            known[tp] = remembered.part
        else:
            stale.append((log, inputs))
    read_largest_timestamps(
        segment for log, _inputs in stale for segment in _sealed_under_time_retention(log)
    )
    for log, inputs in stale:
        part = _log_part(log, inputs, now_ms, cleaner_enabled)
        known[log.topic_partition] = part
        memo[log.topic_partition] = PartitionMemo(inputs, now_ms, part)
    for gone in memo.keys() - known.keys():
        del memo[gone]
    return [known[log.topic_partition] for log in logs] + _unloaded_parts(manager)


class _Inputs(NamedTuple):
    """What a log's figures are computed from: the same inputs, the same figures (until time moves)."""

    snapshot: LogSnapshot
    config: LogConfig
    checkpoint: int | None
    moving: bool
    marked_uncleanable: bool


def _log_part(log: PartitionLog, inputs: _Inputs, now_ms: int, cleaner_enabled: bool) -> PartitionBytes:
    """One log's figures (``partition_bytes``), or its segments' bytes as ``unreadable`` with the error."""
    try:
        return partition_bytes(
            log,
            now_ms=now_ms,
            cleaner_enabled=cleaner_enabled,
            checkpoint=inputs.checkpoint,
            is_moving=inputs.moving,
            is_uncleanable=inputs.marked_uncleanable,
        )
    except (OSError, ValueError) as exc:  # CorruptDataError is a ValueError
        tp = log.topic_partition
        part = PartitionBytes(tp.topic, tp.partition, error=str(exc), path=str(log.directory))
        part.add(UNREADABLE, _segment_bytes(str(log.directory)))
        return part


def _unloaded_parts(manager: LogManager) -> list[PartitionBytes]:
    """The stray replicas', failed partitions' and offline log dirs' bytes, which no loaded log holds."""
    parts = []
    for stray in manager.stray_replicas:
        part = PartitionBytes(
            stray.topic_partition.topic, stray.topic_partition.partition, path=str(stray.path)
        )
        part.add(STRAY, _segment_bytes(str(stray.path)))
        parts.append(part)
    for failed in manager.failed_partitions.values():
        tp = failed.topic_partition
        part = PartitionBytes(tp.topic, tp.partition, error=failed.reason, path=str(failed.path))
        part.add(UNREADABLE, _segment_bytes(str(failed.path)))
        parts.append(part)
    for log_dir, reason in manager.offline_dirs.items():
        part = PartitionBytes(None, None, error=reason, path=str(log_dir))
        part.add(UNREADABLE, _offline_dir_bytes(log_dir))
        parts.append(part)
    return parts


def _sealed_under_time_retention(log: PartitionLog) -> Sequence[LogSegment]:
    """The sealed segments whose largest timestamps ``partition_bytes`` reads (under time retention)."""
    if not log.config.has_delete_policy or log.config.retention_ms < 0:
        return ()
    return log.snapshot.segments[:-1]


def _offline_dir_bytes(log_dir: Path) -> int:
    """The segments' bytes of every partition dir of an offline log dir, by ``stat``: what it holds while
    nothing may act on it (a partition dir that cannot be listed adds nothing; the dir's error names it)."""
    try:
        with os.scandir(log_dir) as entries:
            dirs = [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return 0
    return sum(_segment_bytes(path) for path in dirs)


def unloaded_dir_parts(log_dirs: Iterable[Path], *, skip: Collection[Path] = ()) -> list[PartitionBytes]:
    """The ``-delete`` dirs (``pending-delete``) and ``-future`` dirs (``future-replica``) of ``log_dirs``
    but those in ``skip`` (offline ones, counted already): a listing and a ``stat`` per segment file. A dir
    that cannot be listed counts ``unreadable`` with the error."""
    parts = []
    for log_dir in log_dirs:
        if log_dir in skip:
            continue
        try:
            with os.scandir(log_dir) as entries:
                names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        except OSError as exc:
            part = PartitionBytes(None, None, error=str(exc), path=str(log_dir))
            part.add(UNREADABLE, 0)
            parts.append(part)
            continue
        for name in names:
            try:
                parsed = parse_partition_dir_name(name)
            except ValueError:
                continue
            reason = {"delete": PENDING_DELETE, "future": FUTURE_REPLICA}.get(parsed.kind)
            if reason is not None:
                path = os.path.join(log_dir, name)
                part = PartitionBytes(parsed.topic, parsed.partition, path=path)
                part.add(reason, _segment_bytes(path))
                parts.append(part)
    return parts


def summary_document(parts: Sequence[PartitionBytes], *, generated_at_ms: int) -> JsonDoc:
    """``{"total_bytes", "partitions", "held": [{"reason", "bytes", "partitions", "top", "errors"?}],
    "reclaimable": {...}, "generated_at"}``; ``held`` largest first, its bytes adding up to
    ``total_bytes``."""
    held: dict[str, list[tuple[int, PartitionBytes]]] = {}
    for part in parts:
        for reason, size in part.by_reason.items():
            held.setdefault(reason, []).append((size, part))
    entries = [_held_entry(reason, members) for reason, members in held.items()]
    entries.sort(key=lambda entry: (-_int(entry["bytes"]), str(entry["reason"])))
    candidates = [part for part in parts if part.cleanable is not None]
    return {
        "total_bytes": sum(part.total_bytes for part in parts),
        "partitions": sum(1 for part in parts if part.topic is not None),
        "held": entries,
        "reclaimable": {
            "retention_now": sum(part.retention_now_bytes for part in parts),
            "compaction": sum(part.compaction_freed_bytes or 0 for part in candidates),
            "compaction_estimated": not all(part.compaction_exact for part in candidates),
            "compaction_unestimated_bytes": sum(
                part.cleanable.cleanable_bytes + part.cleanable.clean_bytes
                for part in candidates
                if part.cleanable is not None and part.compaction_freed_bytes is None
            ),
        },
        "generated_at": _iso(generated_at_ms),
    }


def _held_entry(reason: str, members: list[tuple[int, PartitionBytes]]) -> JsonDoc:
    largest = heapq.nsmallest(
        TOP_PARTITIONS, members, key=lambda m: (-m[0], m[1].topic or "", m[1].partition or 0)
    )
    entry: JsonDoc = {
        "reason": reason,
        "bytes": sum(size for size, _ in members),
        "partitions": sum(1 for _, part in members if part.topic is not None),
        "top": [_top(size, part) for size, part in largest],
    }
    errors = [{"path": part.path, "error": part.error} for _, part in members if part.error is not None]
    if errors:
        entry["errors"] = errors
    return entry


def _top(size: int, part: PartitionBytes) -> JsonDoc:
    doc: JsonDoc = {"topic": part.topic, "partition": part.partition, "bytes": size}
    if part.path is not None:
        doc["path"] = part.path
    return doc


def _segment_bytes(directory: str) -> int:
    """The ``.log`` files' sizes in a dir that is not a loaded log; 0 if it cannot be listed."""
    total = 0
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.endswith(LOG_SUFFIX) and entry.name[:1].isdigit():
                    total += entry.stat(follow_symlinks=False).st_size
    except OSError:
        return total
    return total


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _ignore(_path: Path, _exc: Exception) -> None:
    """An unreadable cleaner checkpoint: every log of that dir counts as never cleaned."""

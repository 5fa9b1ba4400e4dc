"""The rewrite of segment groups inside Spark tasks: the same ``clean_group`` the in-process cleaner runs.

Each task gets, through Spark, the (key, latest offset) pairs of every mapped key its group holds
(``key_map``) and builds the group's ``lookup`` from them: a key absent from it is not in the map, so
"-1" (keep) is the right answer for it, as in the in-process map. Everything else a group needs
was decided on the driver (``round_plan``) and travels with the task as a ``RoundTask``. The task reads its
group's segment files itself and writes ``<base>.log.cleaned`` and its indexes next to them (executors
must see the log dirs: local modes share the disk; a real cluster needs them on shared storage), then
returns one metadata row per group. The driver swaps the files in; a task never touches the live segments.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pyarrow as pa
import pyarrow.compute as pc

from cleaner.cleaner import clean_group
from cleaner.native import new_native_key_map
from cleaner.rules import LastRecord
from cleaner.stats import CleanerStats
from cleaner.txn_metadata import CleanedTransactionMetadata
from service.storage.log_config import LogConfig
from service.storage.segment import LogSegment
from service.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from pyspark.sql.udtf import UserDefinedTableFunction

__all__ = [
    "INPUT_DDL",
    "RESULT_DDL",
    "GroupResult",
    "GroupTask",
    "RoundTask",
    "rewrite_group",
    "rewrite_udtf",
]

INPUT_DDL = "slot int, key binary, latest bigint"  # key null: the group's marker row
_COUNTERS = (
    "bytes_read",
    "bytes_written",
    "bytes_skipped",
    "records_read",
    "records_retained",
    "invalid_records",
    "segments_read",
    "groups_rewritten",
    "groups_skipped",
)
_RESULT_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("slot", pa.int32()),
    ("base_offset", pa.int64()),
    ("is_rewritten", pa.bool_()),
    ("lookup_keys", pa.int64()),
    ("mapped_keys", pa.int64()),
    *((name, pa.int64()) for name in _COUNTERS),
    ("task_partition", pa.int32()),
    ("started_ms", pa.int64()),
    ("ended_ms", pa.int64()),
)
_RESULT_SCHEMA = pa.schema([pa.field(name, kind) for name, kind in _RESULT_FIELDS])
_DDL_TYPES = {pa.int32(): "int", pa.int64(): "bigint", pa.bool_(): "boolean"}
RESULT_DDL = ", ".join(f"{name} {_DDL_TYPES[kind]}" for name, kind in _RESULT_FIELDS)


@dataclass(frozen=True, slots=True)
class GroupTask:
    """One group, as its task needs it: segment bases and sizes, aborted txns, starting txn state."""

    end_offset: int  # the next group's base offset, or the round's end: the group's range ends here
    base_offsets: tuple[int, ...]
    sizes_bytes: tuple[int, ...]
    aborted_txns: tuple[tuple[AbortedTxn, ...], ...]
    txn_state: CleanedTransactionMetadata


@dataclass(frozen=True, slots=True)
class RoundTask:
    """The round's shared inputs (``CleaningContext``'s) and every group, by slot."""

    directory: str
    config: LogConfig
    now_ms: int
    upper_bound: int
    map_latest_offset: int
    active_producers: Mapping[int, LastRecord]
    groups: Mapping[int, GroupTask]


@dataclass(frozen=True, slots=True)
class GroupResult:
    """A task's report on one group (driver side)."""

    slot: int
    base_offset: int
    is_rewritten: bool
    lookup_keys: int
    mapped_keys: int  # keys whose latest offset is in this group's range: its share of the map
    stats: CleanerStats
    task_partition: int  # the Spark partition that rewrote it (one group per partition, normally)
    started_ms: int
    ended_ms: int

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> GroupResult:
        def number(name: str) -> int:
            value = row[name]
            if not isinstance(value, int):
                raise TypeError(f"rewrite result {name}={value!r}: expected an int")
            return value

        stats = CleanerStats(**{name: number(name) for name in _COUNTERS})
        return cls(
            slot=number("slot"),
            base_offset=number("base_offset"),
            is_rewritten=bool(row["is_rewritten"]),
            lookup_keys=number("lookup_keys"),
            mapped_keys=number("mapped_keys"),
            stats=stats,
            task_partition=number("task_partition"),
            started_ms=number("started_ms"),
            ended_ms=number("ended_ms"),
        )


def rewrite_group(task: RoundTask, slot: int, latest: Mapping[bytes, int]) -> dict[str, object]:
    """Clean one group into its ``.cleaned`` segment (or leave it, as ``clean_group`` decides)."""
    started_ms = time.time_ns() // 1_000_000
    group = task.groups[slot]
    directory = Path(task.directory)
    segments = [
        LogSegment(directory, base, config=task.config, created_ms=task.now_ms, size_bytes=size)
        for base, size in zip(group.base_offsets, group.sizes_bytes, strict=True)
    ]
    stats = CleanerStats()

    lookup = _lookup_of(latest)
    cleaned = None
    try:
        cleaned = clean_group(
            segments,
            lookup=lookup,
            map_latest_offset=task.map_latest_offset,
            now_ms=task.now_ms,
            delete_retention_ms=task.config.delete_retention_ms,
            upper_bound=task.upper_bound,
            txn_state=group.txn_state.copy(),
            active_producers=task.active_producers,
            aborted_txns=group.aborted_txns,
            directory=directory,
            config=task.config,
            stats=stats,
        )
    finally:
        for segment in [*segments, *([cleaned] if cleaned is not None else [])]:
            _release(segment)
    row: dict[str, object] = {
        "slot": slot,
        "base_offset": group.base_offsets[0],
        "is_rewritten": cleaned is not None,
        "lookup_keys": len(latest),
        "mapped_keys": sum(
            1 for offset in latest.values() if group.base_offsets[0] <= offset < group.end_offset
        ),
        "started_ms": started_ms,
        "ended_ms": time.time_ns() // 1_000_000,
    }
    row.update({name: getattr(stats, name) for name in _COUNTERS})
    return row


def _lookup_of(latest: Mapping[bytes, int]) -> Callable[[bytes], int]:
    """The group's key lookup: in the C map when it is built (``clean_group``'s record loop then runs in
    C, ``cleaner.native``), else over the dict."""
    key_map = new_native_key_map()
    if key_map is None:
        return lambda key: latest.get(key, -1)
    for key, offset in latest.items():
        key_map.put(key, offset)
    return key_map.get


def _release(segment: LogSegment) -> None:
    """Close the segment's descriptors without writing (``LogSegment.close`` would append and trim)."""
    segment.close_file()
    for index in (segment.offset_index, segment.time_index, segment.txn_index):
        index.close()


def collect_latest(rows: pa.RecordBatch, latest_by_slot: dict[int, dict[bytes, int]]) -> None:
    """Add one input batch's (slot, key, latest) rows to the per-group lookups (marker rows: no key)."""
    if rows.num_rows == 0:
        return
    slots = rows.column(0)
    keys = rows.column(1).to_pylist()
    latest = rows.column(2).to_pylist()
    bounds = pc.min_max(slots).as_py()
    if bounds["min"] == bounds["max"]:
        target = latest_by_slot.setdefault(int(bounds["min"]), {})
        target.update(zip(keys, latest, strict=True))
        target.pop(None, None)  # type: ignore[call-overload]  # marker rows carry a null key
        return
    for slot, key, offset in zip(slots.to_pylist(), keys, latest, strict=True):
        target = latest_by_slot.setdefault(slot, {})
        if key is not None:
            target[key] = offset


def rewrite_udtf(tasks: Sequence[RoundTask]) -> UserDefinedTableFunction:
    """The Arrow UDTF (pandas-free) that rewrites the groups of the partition it is given, at its end.

    ``tasks``: one per log the job cleans; their slots are distinct, so a slot names its log and group.
    """
    from pyspark.sql.functions import arrow_udtf

    task_of = {slot: task for task in tasks for slot in task.groups}

    class RewriteGroups:
        def __init__(self) -> None:
            self._latest: dict[int, dict[bytes, int]] = {}

        def eval(self, rows: pa.RecordBatch) -> Iterator[pa.Table]:
            collect_latest(rows, self._latest)
            return iter(())

        def terminate(self) -> Iterator[pa.Table]:
            from pyspark import TaskContext

            context = TaskContext.get()
            partition = context.partitionId() if context is not None else -1
            results = [
                {**rewrite_group(task_of[slot], slot, latest), "task_partition": partition}
                for slot, latest in sorted(self._latest.items())
            ]
            if results:
                yield pa.Table.from_pylist(results, schema=_RESULT_SCHEMA)

    udtf = arrow_udtf(RewriteGroups, returnType=RESULT_DDL)
    # arrow_udtf(cls, ...) returns the UDTF; its annotation also covers the decorator form (cls=None).
    return cast("UserDefinedTableFunction", udtf)

"""The rewrite of segment groups inside Spark tasks, and how a log's groups are cut into its tasks' ranges.

The rewrite of segment groups inside Spark tasks: the same ``clean_group`` the in-process cleaner runs.

Each item cleans one range of consecutive groups of a log (a task runs one item, or takes several of a
shared job one after the other, ``task_files``, then joins the log they all clean last: ``jobs``), with
the key lookup ``partial_maps`` gives it:
the files of the log's key classes (written by the round's map job), their bitmaps OR'd into a C key map
and their blobs put only if a lookup needs them; or, for a log of one range, its dirty segments mapped by
the task itself.
Everything else a group needs was decided on the driver (``round_plan``) and
travels with the task as a ``RoundTask``. The task reads its group's segment files itself and writes
``<base>.log.cleaned`` and its indexes next to them (executors must see the log dirs: local modes share the
disk; a real cluster needs them on shared storage), then returns one metadata row per group. The driver
swaps the files in; a task never touches the live segments. A group's files are fsynced on a thread of the
task's own while it cleans its next group (``CleanedSyncs``): an item reports its rows (``task_files``),
and the task returns them, once all are durable.

How a log's groups are cut into the consecutive ranges of its rewrite tasks, and what each group costs.

Before anything is mapped, the driver cuts by bytes (``jobs.ranges_per_log`` decides how many), to
decide whether cutting a log shortens its longest task enough. A log mapped by key hash is then cleaned
by tasks that take its groups one at a time (``task_files``), the costliest first by ``rewrite_costs``,
which the classes' superseded bitmaps tell. A group's rewrite reads all of its bytes, and re-encodes and
writes the records it keeps; in a log whose keys are updated all along, the first groups keep almost
nothing and the last ones most, so equal bytes are far from equal work.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from cleaner.compaction.cleaner import clean_group
from cleaner.compaction.group_swap import SwapThread
from cleaner.compaction.rules import LastRecord
from cleaner.compaction.stats import CleanerStats
from cleaner.compaction.txn_metadata import CleanedTransactionMetadata
from cleaner.spark.partial_maps import MapSplit, ensure_class_files, range_lookup, superseded_in
from cleaner.spark.task_files import (
    JobCancelledError,
    TaskTicket,
    TicketRef,
    claimed_groups,
    take,
    write_report,
)
from service.storage.log_config import LogConfig
from service.storage.segment import LogSegment
from service.storage.txn_index import AbortedTxn

__all__ = [
    "CleanedSyncs",
    "GroupResult",
    "GroupTask",
    "KEPT_COST",
    "RewriteItem",
    "RoundTask",
    "balanced_ranges",
    "rewrite_costs",
    "rewrite_group",
    "rewrite_partition",
]

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
    ticket: TicketRef  # the round's ticket (``task_files``): held while the task writes


@dataclass(frozen=True, slots=True)
class GroupResult:
    """A task's report on one group (driver side)."""

    slot: int
    base_offset: int
    is_rewritten: bool
    lookup_keys: int  # keys in the group's lookup (the log's first group: the whole map)
    stats: CleanerStats
    task_partition: int  # the Spark partition that rewrote it
    started_ms: int  # when its rewrite started (the task's first group: after the lookup was built)
    ended_ms: int
    lookup_ms: int  # the task's time building its lookup (on its first group's row; 0 on the others)
    spill_classes: int  # the classes its lookup's map spilled to (0: within the share, or unbounded)

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
            stats=stats,
            task_partition=number("task_partition"),
            started_ms=number("started_ms"),
            ended_ms=number("ended_ms"),
            lookup_ms=number("lookup_ms"),
            spill_classes=number("spill_classes"),
        )


@dataclass(frozen=True, slots=True)
class RewriteItem:
    """One rewrite task's input: consecutive groups (``slots``) of the job's ``log``-th round, and where
    its lookup comes from (``partial_maps.range_lookup``): the splits it maps itself (``own``; a log of one
    range), or its log's key classes (``class_maps``: their files, made by whichever task gets to a class
    first). With ``ranges`` > 1, ``slots`` are all of the log's groups: the task cleans those it takes
    from ``claims_path`` (``task_files``), and ``range_index`` says which class it maps first."""

    log: int
    slots: tuple[int, ...]
    own: MapSplit | None = None
    class_maps: tuple[MapSplit, ...] = ()
    range_index: int = 0
    ranges: int = 1
    claims_path: str = ""  # with ranges > 1: where its log's tasks take their groups (``task_files``)
    report_path: str = ""  # where its rows go as it ends (``task_files``), if the driver settles early
    taken_path: str = ""  # where a task takes it (``task_files``), if every task tries every item


def rewrite_group(
    task: RoundTask, slot: int, lookup: Callable[[bytes], int], lookup_keys: int, syncs: CleanedSyncs
) -> dict[str, object]:
    """Clean one group into its ``.cleaned`` segment (or leave it, as ``clean_group`` decides), handed to
    ``syncs`` to be made durable."""
    started_ms = time.time_ns() // 1_000_000
    group = task.groups[slot]
    directory = Path(task.directory)
    segments = [
        LogSegment(directory, base, config=task.config, created_ms=task.now_ms, size_bytes=size)
        for base, size in zip(group.base_offsets, group.sizes_bytes, strict=True)
    ]
    stats = CleanerStats()
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
            fsync=False,
        )
    finally:
        for segment in segments:
            _release(segment)
    if cleaned is not None:
        syncs.hand_over(cleaned)
    row: dict[str, object] = {
        "slot": slot,
        "base_offset": group.base_offsets[0],
        "is_rewritten": cleaned is not None,
        "lookup_keys": lookup_keys,
        "started_ms": started_ms,
        "ended_ms": time.time_ns() // 1_000_000,
    }
    row.update({name: getattr(stats, name) for name in _COUNTERS})
    return row


def _release(segment: LogSegment) -> None:
    """Close the segment's descriptors without writing (``LogSegment.close`` would append and trim)."""
    segment.close_file()
    for index in (segment.offset_index, segment.time_index, segment.txn_index):
        index.close()


class CleanedSyncs:
    """A task's finished ``.cleaned`` segments made durable on a thread of its own (``SwapThread``), one
    after the other, while the task cleans its next group: a group's four fsyncs (log and indexes) wait
    on the disk, ms each, and a round of many small logs has a group per 16 MiB. Leaving the ``with``
    waits for every one handed over (the task's ticket is still held) and raises the first failure: the
    task fails, and the driver swaps nothing of its log. The driver swaps a log only once all its tasks
    have ended."""

    def __init__(self) -> None:
        self._thread = SwapThread("logcleaner-cleaned-fsync")
        self._failure: BaseException | None = None

    def hand_over(self, cleaned: LogSegment) -> None:
        self._thread.submit(lambda: self._sync(cleaned))

    def _sync(self, cleaned: LogSegment) -> None:
        try:
            if self._failure is None:
                cleaned.flush()
        except BaseException as exc:  # raised on the task's thread, leaving the with
            self._failure = exc
        finally:
            try:
                _release(cleaned)
            except BaseException as exc:
                self._failure = self._failure or exc

    def __enter__(self) -> CleanedSyncs:
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self._thread.close()  # on the way out of a failed task too: nothing runs after the ticket
        if _exc is None and self._failure is not None:
            raise self._failure


def _own_groups(
    task: RoundTask, item: RewriteItem, class_files: Sequence[str], partition: int
) -> Iterable[int]:
    """The groups this task cleans: its item's, or those it takes one by one from its log's claims, the
    costliest first (``task_files``; the costs from the classes' bitmaps, ``rewrite_costs``)."""
    if item.ranges <= 1:
        return item.slots
    groups = [task.groups[slot] for slot in item.slots]
    costs = rewrite_costs(
        [g.base_offsets[0] for g in groups],
        [g.end_offset for g in groups],
        [sum(g.sizes_bytes) for g in groups],
        superseded_in(class_files),
    )
    return claimed_groups(item.claims_path, partition, item.slots, costs)


def rewrite_partition(
    tasks: Sequence[RoundTask], items: Sequence[RewriteItem]
) -> Callable[[int, Iterable[object]], Iterator[dict[str, object]]]:
    """The function rewrite task ``partition`` runs (``mapPartitionsWithIndex``): the items it takes and
    its range of the log the tasks share (``_items_of``), or ``items[partition]``; per item, it builds its
    lookup, then cleans its groups of its log (``tasks[item.log]``) one after the other. An item with a
    report path leaves its rows there as it ends (``task_files``), its files durable and still under its
    ticket."""

    def run(partition: int, _input: Iterable[object]) -> Iterator[dict[str, object]]:
        rows: list[dict[str, object]] = []
        for item in _items_of(items, partition):
            task = tasks[item.log]
            with ExitStack() as held:
                try:
                    ticket = held.enter_context(TaskTicket(task.ticket))
                except JobCancelledError:
                    if item.taken_path:
                        continue  # its log was settled, or the job is ending: nothing to take
                    raise
                if item.taken_path and not take(item.taken_path, item.report_path, partition):
                    continue
                first = len(rows)
                rows.extend(_clean_item(task, item, ticket, partition))
                if item.report_path:
                    write_report(item.report_path, rows[first:])
        return iter(rows)  # after the ticket is released: nothing is written while Spark reads the rows

    return run


def _items_of(items: Sequence[RewriteItem], partition: int) -> list[RewriteItem]:
    """What task ``partition`` runs: ``items[partition]``; or, in a job whose tasks take its items
    (``task_files``), every item to take, then its own range of the log they clean together (``jobs``),
    if it has one."""
    if not any(item.taken_path for item in items):
        return list(items[partition : partition + 1])
    return [item for item in items if item.taken_path or item.range_index == partition]


def _clean_item(
    task: RoundTask, item: RewriteItem, ticket: TaskTicket, partition: int
) -> Iterator[dict[str, object]]:
    """The item's rows, one per group it cleaned; the groups' files durable once the last row is out."""
    with CleanedSyncs() as syncs:
        started_ms = time.time_ns() // 1_000_000
        paths = [one.blob_path for one in item.class_maps]
        if item.class_maps:
            ensure_class_files(item.class_maps, item.range_index, ticket)
        found = range_lookup(item.own, paths)
        lookup_ms = time.time_ns() // 1_000_000 - started_ms
        started_ms += lookup_ms
        for slot in _own_groups(task, item, paths, partition):
            ticket.check()
            row = rewrite_group(task, slot, found.lookup, found.keys, syncs)
            yield {
                **row,
                "started_ms": started_ms,
                "task_partition": partition,
                "lookup_ms": lookup_ms,
                "spill_classes": found.spill_classes,
            }
            started_ms, lookup_ms = time.time_ns() // 1_000_000, 0


# A group's rewrite costs its bytes, and this much more per byte for the share of its records it keeps (the
# survivors re-encoded and written). Fitted on this project's benchmark (groups of a 1.1 GiB log, 1M keys;
# a batch the bitmap marks wholly superseded is dropped unparsed): 127 MiB keeping ~0% of its records
# 15-20 ms; 10% 38 ms in-process, 69 ms in a Spark task; 31% 52 and 157 ms; 70 MiB keeping 74% 84 and
# 148 ms. That is 5-9 in-process and 23-37 in Spark tasks, whose new pages cost more on this project's VM
# (the first touch of memory not used recently); every value from 8 to 20 cuts that log the same way.
# Earlier fits: 8 (the upper bound's batch made its task put every deferred entry), then 3 (before the
# dropped batches went unparsed, when the pages written were warm). It now only orders the groups the
# tasks take (``task_files``): a poor fit costs at most about one group's time at the end.
KEPT_COST = 10.0


def rewrite_costs(
    bases: Sequence[int], ends: Sequence[int], sizes: Sequence[int], superseded: Iterable[tuple[int, int]]
) -> list[float]:
    """Each group's cost: ``bases``/``ends`` its offsets [base, end), ``sizes`` its bytes; ``superseded``
    the (first offset, count) buckets of the key classes' bitmaps (``partial_maps.superseded_counts``),
    each counted in the group it starts in. The share of a group's offsets not superseded stands for the
    share of its records it keeps (offsets below the map's, in already cleaned segments, all count kept)."""
    gone = [0] * len(bases)
    for start, count in superseded:
        at = bisect.bisect_right(bases, start) - 1
        if at >= 0:
            gone[at] += count
    return [
        size * (1 + KEPT_COST * max(0.0, 1 - dropped / max(end - base, 1)))
        for size, dropped, base, end in zip(sizes, gone, bases, ends, strict=True)
    ]


def balanced_ranges(weights: Sequence[float], slots: Sequence[int], count: int) -> list[tuple[int, ...]]:
    """``slots`` (one a group, ``weights`` theirs) cut into ``count`` consecutive ranges of about equal
    weight (fewer if there are fewer groups): range k ends at the group whose end lies nearest to k/count
    of the total."""
    ends = list(itertools.accumulate(weights))
    cuts = {0, len(slots)}
    for k in range(1, count):
        target = ends[-1] * k / count
        at = bisect.bisect_left(ends, target)
        if at > 0 and target - ends[at - 1] <= ends[min(at, len(ends) - 1)] - target:
            at -= 1
        cuts.add(min(at + 1, len(slots)))
    bounds = sorted(cuts)
    return [tuple(slots[lo:hi]) for lo, hi in itertools.pairwise(bounds) if hi > lo]

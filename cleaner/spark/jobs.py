"""One Spark job on the driver: its logs, how they become its rewrite tasks, and each log until it is settled.

One Spark job's logs on the driver, from the job's start until each is settled.

A job cleans one log, or several (``SparkEngine.clean_many``). For each it holds the round's plan, ticket,
rewrite items and scratch files (key class maps, claims, reports), and which logs were settled while the job
ran: as soon as every item of a log has reported (``task_files``), the log's ticket is withdrawn, its
scratch files removed, its results checked and the log handed on to be swapped in, while the job's other
tasks still run. Whatever the job then does (fails, is cancelled), a settled log's files are no longer
touched.

How a Spark job's logs become its rewrite tasks: how many ranges each log is cut into, how its key map
is built, each range's input (``RewriteItem``), and how many tasks run them.

Every log's groups are cut into ranges, about one task per core over the job (``ranges_per_log``: many
logs get one each, ranges of at least ``min_range_bytes``). A log of one range is one task that maps its
dirty segments itself, in offset order. A log of several ranges is mapped by key hash: its tasks map the
key classes into files first (``partial_maps``), then take its groups one at a time (``task_files``).
A job of more logs than cores runs one task a core, each taking the logs one after the other, the largest
first (``task_files``): a task costs 10–35 ms more than the work it does. Its smallest log is left to them
all (``shared_log``): cut into a range a task and mapped by key hash, so each task joins it once it finds
no log left to take, and the tasks end within about a group of each other, not a log (8 logs of 128 MiB on
2 cores: 1.11 s a job against 1.26 s with one task left alone on the last log, medians of 8).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import cast

from cleaner.compaction.cleaned_writer import delete_cleaned_files
from cleaner.compaction.key_map_budget import KeyMapBudget
from cleaner.native import puts_pipelined
from cleaner.spark.partial_maps import MapSplit, blob_path, class_tasks, own_map
from cleaner.spark.rewrite import GroupResult, GroupTask, RewriteItem, RoundTask, balanced_ranges
from cleaner.spark.round_plan import GroupPlan, RoundPlan
from cleaner.spark.segment_splits import SegmentSplit, plan_splits
from cleaner.spark.task_files import (
    JobReports,
    JobTicket,
    TicketRef,
    claims_path,
    private_leftovers,
    report_path,
    taken_path,
)
from service.storage.log import PartitionLog

__all__ = [
    "DEFAULT_MIN_RANGE_BYTES",
    "JobLogs",
    "LogOutcome",
    "MAX_KEY_CLASSES",
    "delete_cleaned",
    "key_classes",
    "plan_tasks",
    "ranges_per_log",
    "rows_by_slot",
    "shared_log",
]

LogOutcome = tuple[list[GroupResult], int]  # a log's group results in offset order, and its map size


class JobLogs:
    """The logs of one job (see the module docstring). Used on the worker's thread only: ``on_report`` runs
    there too, between the job's abort checks."""

    def __init__(
        self,
        logs: Sequence[PartitionLog],
        plans: list[RoundPlan],
        tickets: list[JobTicket],
        settle_early: Callable[[int, LogOutcome | BaseException], None] | None,
    ) -> None:
        self.logs = logs
        self.plans = plans
        self.tickets = tickets
        self.settle_early = settle_early
        self.round_tasks: list[RoundTask] = []
        self.items: list[RewriteItem] = []  # partition p cleans items[p], or those it takes (plan_tasks)
        self.partitions = 0  # the job's rewrite tasks
        self.scratch: list[tuple[int, str]] = []  # (log, path): its map, claim, report files (removed after)
        self.settled: set[int] = set()
        self._reported: dict[int, list[Mapping[str, object]]] = {}
        self._reports: dict[int, int] = {}

    def reports(self) -> JobReports | None:
        """What the driver waits on for its items' reports, if it settles logs early."""
        if self.settle_early is None:
            return None
        return JobReports([(item.log, item.report_path) for item in self.items])

    def on_report(self, report: object) -> None:
        """An item's ``(log, rows)`` (``task_files``): once every item of that log has reported, the log
        is settled now (``settle_early``)."""
        if self.settle_early is None:
            return
        log, rows = cast(tuple[int, list[Mapping[str, object]]], report)  # what rewrite_partition sends
        self._reported.setdefault(log, []).extend(rows)
        self._reports[log] = self._reports.get(log, 0) + 1
        if self._reports[log] < sum(1 for item in self.items if item.log == log) or log in self.settled:
            return
        self.settled.add(log)
        self.tickets[log].close()  # no attempt of its tasks writes after this
        self.delete_scratch_files(log)
        outcome: LogOutcome | BaseException
        try:
            outcome = self.results_of(
                log, rows_by_slot(self._reported[log], str(self.logs[log].topic_partition))
            )
        except Exception as exc:
            delete_cleaned(self.logs[log].directory, self.plans[log].groups)
            outcome = exc
        self.settle_early(log, outcome)

    def results_of(self, log: int, by_slot: Mapping[int, GroupResult]) -> LogOutcome:
        """The log's group results in offset order, and its map size; an error if a group reported nothing
        (its ``.cleaned`` files then deleted)."""
        slots, plan, directory = list(self.round_tasks[log].groups), self.plans[log], self.logs[log].directory
        missing = [g.base_offset for g, s in zip(plan.groups, slots, strict=True) if s not in by_slot]
        if missing:
            delete_cleaned(directory, plan.groups)
            tp = self.logs[log].topic_partition
            raise RuntimeError(f"{tp}: the Spark job reported no result for groups based at {missing}")
        results = [by_slot[s] for s in slots]
        return results, max((r.lookup_keys for r in results), default=0)  # the first group's: the whole map

    def withdraw_tickets(self) -> None:
        for ticket in self.tickets:
            ticket.close()

    def delete_cleaned(self) -> None:
        """The ``.cleaned`` files of every log not settled yet."""
        for i, (log, plan) in enumerate(zip(self.logs, self.plans, strict=True)):
            if i not in self.settled:
                delete_cleaned(log.directory, plan.groups)

    def delete_scratch_files(self, log: int | None = None) -> None:
        """The key class, claim and report files of ``log``, or of every log not settled yet, and what killed
        tasks left half written (``private_leftovers``). Called only while no task holds their tickets."""
        for owner, path in self.scratch:
            if owner == log or (log is None and owner not in self.settled):
                Path(path).unlink(missing_ok=True)
        for i, (partition_log, plan) in enumerate(zip(self.logs, self.plans, strict=True)):
            if i == log or (log is None and i not in self.settled):
                for leftover in private_leftovers(partition_log.directory, plan.end_offset):
                    leftover.unlink(missing_ok=True)


def rows_by_slot(rows: Sequence[Mapping[str, object]], what: str) -> dict[int, GroupResult]:
    """The tasks' rows by group slot; an error if two tasks rewrote one group (never swap such a round)."""
    by_slot = {r.slot: r for r in map(GroupResult.from_row, rows)}
    if len(by_slot) != len(rows):
        raise RuntimeError(f"{what}: two Spark tasks rewrote one group")
    return by_slot


def delete_cleaned(directory: Path, groups: Sequence[GroupPlan]) -> None:
    """Remove the ``.cleaned`` files the tasks may have written for ``groups`` (none are live segments)."""
    for group in groups:
        delete_cleaned_files(directory, group.base_offset)


# A log's splits all go to one map (its own range's, or each key class's), so segments are not cut: no
# segment's index is read but the one holding the first dirty offset.
_WHOLE_SEGMENTS = 1 << 62
# A log is cut into more rewrite ranges (tasks) only while each stays at least this large.
DEFAULT_MIN_RANGE_BYTES = 64 << 20
# A log is cut into ranges only if none holds more than this share of its bytes: mapping each key class
# over the whole log and the map files cost more than a range that is only a little shorter saves.
_MAX_RANGE_SHARE = 0.75
# Each key class's map scans the log's whole dirty section and keeps 1/K of its keys. Past four classes a
# class's map is no faster (the scan is half of its time, as measured on a 1.1 GiB log), while
# each more class reads the whole dirty section once more: a log cut into 64 ranges on a cluster would
# otherwise be read 32 times over. The tasks past the classes find them mapped (``partial_maps``).
MAX_KEY_CLASSES = 4


def plan_tasks(job: JobLogs, cores: int, min_range_bytes: int, budget: KeyMapBudget | None = None) -> None:
    """The job's rewrite items (``job.items``, ``job.round_tasks``), its task count (``job.partitions``)
    and scratch files (``job.scratch``). A log whose map could pass ``budget`` (a thread's share of the
    dedupe buffer) is mapped by one task in one bounded map (``bounded_maps``)."""
    used = 0
    for log, plan, ticket in zip(job.logs, job.plans, job.tickets, strict=True):
        slots = list(range(used, used + len(plan.groups)))
        used += len(slots)
        job.round_tasks.append(_round_task(log, plan, slots, ticket.ref))
    sizes = [sum(s.size_bytes for g in plan.groups for s in g.segments) for plan in job.plans]
    counts = ranges_per_log(sizes, cores, min_range_bytes)
    shared = shared_log(sizes, [len(plan.groups) for plan in job.plans], cores)
    for i, (log, plan, task) in enumerate(zip(job.logs, job.plans, job.round_tasks, strict=True)):
        ranges = min(cores, len(plan.groups)) if i == shared else _range_count(task, counts[i])
        splits = _dirty_splits(log, plan)
        bounded = _bounded(i, log, plan, splits, budget)
        if ranges == 1:
            own = own_map(i, splits, plan.first_dirty_offset, plan.map_scan.aborted_batches)
            job.items.append(RewriteItem(i, tuple(task.groups), bounded or own))
            continue
        class_maps: tuple[MapSplit, ...] = ()
        if bounded is not None:  # one bounded map of every key, mapped by the first task to its file
            class_maps = (replace(bounded, blob_path=blob_path(str(log.directory), plan.end_offset, 0)),)
            job.scratch.append((i, class_maps[0].blob_path))
        elif splits:  # the map by key hash, mapped by the rewrite tasks (partial_maps)
            class_maps = tuple(
                replace(one, blob_path=blob_path(str(log.directory), plan.end_offset, one.key_class))
                for one in class_tasks(
                    i,
                    splits,
                    plan.first_dirty_offset,
                    plan.map_scan.aborted_batches,
                    key_classes(ranges),
                )
            )
            job.scratch.extend((i, one.blob_path) for one in class_maps)
        claims = claims_path(str(log.directory), plan.end_offset)
        job.scratch.append((i, claims))
        job.items.extend(
            RewriteItem(
                i,
                tuple(task.groups),
                class_maps=class_maps,
                range_index=r,
                ranges=ranges,
                claims_path=claims,
            )
            for r in range(ranges)
        )
    _report_and_claim(job, sizes, cores, shared)


def _report_and_claim(job: JobLogs, sizes: Sequence[int], cores: int, shared: int | None) -> None:
    """Each item's report file, if the job settles logs early (``task_files``); with more logs than
    cores, one task a core, taking the items the largest first (``task_files``), then each running its
    range of the ``shared`` log, if any."""
    # A log of several ranges is never taken: its group claims name a task's partition (``task_files``),
    # and a task taking two of its ranges would take its own groups again.
    taking = len(job.logs) > cores
    if taking:  # the items to take, the largest first, then the shared log's ranges
        job.items.sort(key=lambda item: (item.log == shared, -sizes[item.log]))
    items, job.items = job.items, []
    for item in items:
        directory, end = str(job.logs[item.log].directory), job.plans[item.log].end_offset
        if job.settle_early is not None:
            item = replace(item, report_path=report_path(directory, end, item.range_index))
            job.scratch.append((item.log, item.report_path))
        if taking and item.log != shared:
            item = replace(item, taken_path=taken_path(directory, end))
            job.scratch.append((item.log, item.taken_path))
        job.items.append(item)
    job.partitions = cores if taking else len(job.items)


def ranges_per_log(sizes: Sequence[int], cores: int, min_range_bytes: int) -> list[int]:
    """How many ranges (rewrite tasks) each log of a job is cut into: one each, then, while the job has
    fewer than ``cores``, one more for the log with the most bytes a range, as long as its ranges stay at
    least ``min_range_bytes``. Many logs: one range each, no blob file; one large log: about one a core."""
    counts = [1] * len(sizes)
    for _ in range(cores - len(sizes)):
        best = max(range(len(sizes)), key=lambda i: sizes[i] / counts[i], default=None)
        if best is None or sizes[best] // (counts[best] + 1) < min_range_bytes:
            break
        counts[best] += 1
    return counts


def shared_log(sizes: Sequence[int], groups: Sequence[int], cores: int) -> int | None:
    """The log a job's tasks clean together at its end, if it has more logs (``sizes`` their bytes,
    ``groups`` their groups) than ``cores`` and several cores: its smallest, which they would take last,
    unless it has a single group (nothing to share)."""
    if cores < 2 or len(sizes) <= cores:
        return None
    smallest = min(range(len(sizes)), key=lambda i: sizes[i])
    return smallest if groups[smallest] > 1 else None


def key_classes(ranges: int) -> int:
    """How many key classes a log of ``ranges`` rewrite ranges is mapped in: one per two ranges, as a class's
    map takes two cores when its puts run on a thread of their own (``native.puts_on_own_thread``); at
    most ``MAX_KEY_CLASSES``, however many ranges a cluster's cores make."""
    per_class = 2 if puts_pipelined() else 1
    return min(max(1, (ranges + per_class - 1) // per_class), MAX_KEY_CLASSES)


def _bounded(
    index: int,
    log: PartitionLog,
    plan: RoundPlan,
    splits: Sequence[SegmentSplit],
    budget: KeyMapBudget | None,
) -> MapSplit | None:
    """The log's one map of every key, bounded by ``budget``, if its dirty section could pass it
    (``KeyMapBudget.may_pass``, as the in-process round asks); None: the map fits, and is built unbounded,
    by key class if the log has several ranges (each class then smaller still)."""
    first_offset = plan.groups[0].base_offset if plan.groups else plan.first_dirty_offset
    start, end = plan.first_dirty_offset, plan.end_offset
    if budget is None or not splits or not budget.may_pass(first_offset, start, end):
        return None
    clean: list[SegmentSplit] = []
    if start > first_offset:  # the clean section, which a spilled map probes
        clean = plan_splits(log.directory, until_offset=start, max_split_bytes=_WHOLE_SEGMENTS)
    return MapSplit(
        index,
        0,
        tuple(splits),
        plan.first_dirty_offset,
        frozenset(plan.map_scan.aborted_batches),
        budget=budget,
        first_offset=first_offset,
        end_offset=plan.end_offset,
        clean_splits=tuple(clean),
    )


def _dirty_splits(log: PartitionLog, plan: RoundPlan) -> list[SegmentSplit]:
    if not plan.has_dirty_segments:
        return []
    return plan_splits(
        log.directory,
        from_offset=plan.first_dirty_offset,
        until_offset=plan.end_offset,
        max_split_bytes=_WHOLE_SEGMENTS,
    )


def _round_task(log: PartitionLog, plan: RoundPlan, slots: list[int], ticket: TicketRef) -> RoundTask:
    return RoundTask(
        ticket=ticket,
        directory=str(log.directory),
        config=log.config,
        now_ms=plan.now_ms,
        upper_bound=plan.upper_bound,
        map_latest_offset=plan.map_latest_offset,
        active_producers=dict(plan.active_producers),
        groups={
            slot: GroupTask(
                end_offset=next_base,
                base_offsets=tuple(s.base_offset for s in group.segments),
                sizes_bytes=tuple(s.size_bytes for s in group.segments),
                aborted_txns=group.aborted_txns,
                txn_state=group.txn_state,
            )
            for group, slot, next_base in zip(
                plan.groups, slots, [*(g.base_offset for g in plan.groups[1:]), plan.end_offset], strict=True
            )
        },
    )


def _range_count(task: RoundTask, count: int) -> int:
    """How many ranges a log is cut into: ``count`` (fewer if it has fewer groups), or 1 if its longest
    range would still hold more than ``_MAX_RANGE_SHARE`` of its bytes (cutting would not shorten its
    longest task enough)."""
    group_bytes = {slot: sum(group.sizes_bytes) for slot, group in task.groups.items()}
    ranges = balanced_ranges(list(group_bytes.values()), list(group_bytes), count)
    longest = max(sum(group_bytes[slot] for slot in run) for run in ranges)
    return 1 if longest > _MAX_RANGE_SHARE * sum(group_bytes.values()) else len(ranges)

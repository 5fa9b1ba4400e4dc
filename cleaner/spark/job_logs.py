"""One Spark job's logs on the driver, from the job's start until each is settled.

A job cleans one log, or several (``SparkEngine.clean_many``). For each it holds the round's plan, ticket,
rewrite items and scratch files (key class maps, claims, reports), and which logs were settled while the job
ran: as soon as every item of a log has reported (``task_reports``), the log's ticket is withdrawn, its
scratch files removed, its results checked and the log handed on to be swapped in, while the job's other
tasks still run. Whatever the job then does (fails, is cancelled), a settled log's files are no longer
touched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import cast

from cleaner.compaction.cleaned_writer import delete_cleaned_files
from cleaner.spark.job_ticket import JobTicket
from cleaner.spark.rewrite import GroupResult, RewriteItem, RoundTask
from cleaner.spark.round_plan import GroupPlan, RoundPlan
from cleaner.spark.task_reports import JobReports, private_leftovers
from service.storage.log import PartitionLog

__all__ = ["JobLogs", "LogOutcome", "delete_cleaned", "rows_by_slot"]

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
        self.items: list[RewriteItem] = []  # partition p cleans items[p], or those it takes (job_plan)
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
        """An item's ``(log, rows)`` (``task_reports``): once every item of that log has reported, the log
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

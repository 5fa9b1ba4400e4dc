"""``log.cleaner.engine=spark``: a cleaning round's heavy work as Spark tasks, swapped in by the driver.

A round, as ``Cleaner.clean`` runs it but with the records handled in Spark:

1. driver: ``plan_round`` (upper bound, groups, each group's aborted txns and starting transaction state,
   active producers, the dirty section's aborted data batches; one pass over batch headers);
2. the log's groups are cut into consecutive ranges of about equal bytes, one rewrite task each
   (``ranges_per_log``: about one task per core over the job, ranges of at least ``min_range_bytes``; many
   logs get one each). A log of one range needs one Spark job: its task maps its dirty segments itself in
   C, in offset order, then ``clean_group`` rewrites its groups with that map, as the in-process round
   does. A log of several ranges is mapped by key hash, in the same job: it has one task per range and
   a key class per two ranges (``key_classes``: a class's map puts on a thread of its own, two cores);
   each task makes sure every class's map file exists (the first task to reach a
   class maps it in C over the whole dirty section and writes its blob and superseded bitmap to a scratch
   file in the log's dir, under that file's lock; ``partial_maps``), ORs every class's bitmap and keeps
   their blobs for the lookups the bits cannot answer, then takes the log's groups one at a time, the
   costliest free one first by what each keeps (``group_claims``), and cleans them (only paths go
   through Spark; no exchange, no aggregation by key, no Python object per record), writing
   ``<base>.log.cleaned`` (``rewrite``); only per-group metadata returns. A round ticket
   (``job_ticket``) guarantees that no task of a cancelled or failed job writes after the driver removed
   the tasks' files; the scratch files are removed after the job, whatever happened, before any swap;
3. driver: in offset order, ``check_aborted`` then ``log.replace_segments`` (Kafka's .cleaned → .swap →
   .deleted protocol, crash-safe as in ``cleaner.cleaner``) and ``schedule_delete`` of the replaced files.

An abort or an error before a group is swapped deletes that group's ``.cleaned`` files and every later
one's, then re-raises; groups already swapped stay (each is a complete cleaning). Throttling is coarse:
``throttle`` hears the tasks' bytes read and written once the job is done (and the map pass's bytes, which
the driver replays), so the round's average rate obeys ``log.cleaner.io.max.bytes.per.second`` while the
jobs themselves run unthrottled. Timings: map build = from the round's start until the first rewrite task
has its lookup (tasks report wall-clock times), rewrite = the rest. The driver never holds the key map.

Several logs in one job (``clean_many``, up to ``log.cleaner.spark.max.logs.per.job`` logs a worker took
together): each log is planned on its own; the tasks of every log make the one job (a log's map files
go only to its own tasks); each log is swapped in and reported (``on_done``) on its own as soon as its own
tasks have ended (``task_reports``), while the job's other tasks still run. An abort of one log (seen by
the job's poll) cancels the job and runs it again without that log; a job that fails is run again as one
job per log (those not settled yet), so a log whose data breaks its tasks fails alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TypeVar, cast

from pyspark import SparkContext
from pyspark.sql import SparkSession

from cleaner.cleaner import CleaningResult, ScheduleDelete, delete_segments
from cleaner.engine import LogRound
from cleaner.errors import CleaningAbortedError
from cleaner.native import puts_pipelined
from cleaner.offset_map import kafka_utilization_percent
from cleaner.spark.group_claims import claims_path
from cleaner.spark.job_ticket import JobTicket
from cleaner.spark.jobs import run_action
from cleaner.spark.partial_maps import MapSplit, blob_path, class_tasks, map_tasks
from cleaner.spark.rewrite import GroupResult, GroupTask, RewriteItem, RoundTask, rewrite_partition
from cleaner.spark.rewrite_ranges import balanced_ranges
from cleaner.spark.round_plan import GroupPlan, RoundPlan, plan_round
from cleaner.spark.segment_splits import SegmentSplit, plan_splits
from cleaner.spark.session import SparkSessionHolder, pool_name
from cleaner.spark.task_reports import ReportChannel
from cleaner.stats import CleanerStats
from service.clock import Clock
from service.storage.log import PartitionLog
from service.storage.log_files import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_path,
)
from service.storage.segment import LogSegment

__all__ = ["SparkEngine"]

_NO_PACKING = 1 << 62  # one map task for all of a range's splits
# A log's splits all go to one map (its own range's, or each key class's), so segments are not cut: no
# segment's index is read but the one holding the first dirty offset.
_WHOLE_SEGMENTS = 1 << 62
# A log is cut into more rewrite ranges (tasks) only while each stays at least this large.
DEFAULT_MIN_RANGE_BYTES = 64 << 20
# A log is cut into ranges only if none holds more than this share of its bytes: mapping each key class
# over the whole log and the map files cost more than a range that is only a little shorter saves.
_MAX_RANGE_SHARE = 0.75
T = TypeVar("T")
_LogOutcome = tuple[list[GroupResult], int]  # a log's group results in offset order, and its map size

logger = logging.getLogger(__name__)


class SparkEngine:
    """Cleans on Spark; the SparkSession starts at the first round and lives until ``close``.

    ``spark_conf``: every ``spark.*`` key (``BrokerConfig.spark_conf``), ``spark.master`` included; or pass
    ``session`` to share a ``SparkSessionHolder`` (tests share one per test session). ``dedupe_buffer_bytes``
    and ``load_factor`` only feed ``buffer_utilization`` (Kafka's 24-bytes-per-key figure). ``on_job`` hears
    each Spark action's duration in seconds. Thread-safe: workers call ``clean`` concurrently, each in the
    FAIR pool of its ``thread_id``. Executors read and write segment files themselves: ``local[*]`` and
    ``local-cluster`` share this machine's disk; on a real cluster every executor must see the log dirs at
    the same path (shared storage), and the package must be installed on every node.
    """

    name = "spark"

    def __init__(
        self,
        *,
        clock: Clock,
        spark_conf: Mapping[str, str] | None = None,
        dedupe_buffer_bytes: int = 134_217_728,
        load_factor: float = 0.9,
        on_job: Callable[[float], None] | None = None,
        session: SparkSessionHolder | None = None,
        min_range_bytes: int = DEFAULT_MIN_RANGE_BYTES,
        poll_interval_s: float = 0.1,
    ) -> None:
        self.clock = clock
        self.session = session or SparkSessionHolder(spark_conf)
        self.dedupe_buffer_bytes = dedupe_buffer_bytes
        self.load_factor = load_factor
        self.on_job = on_job
        self.min_range_bytes = min_range_bytes
        self.poll_interval_s = poll_interval_s
        self._channel: ReportChannel | None = None
        self._channel_lock = threading.Lock()

    def close(self) -> None:
        """Stop the SparkSession (the daemon calls this once, at shutdown)."""
        self.session.stop()

    shutdown = close

    def clean(
        self,
        log: PartitionLog,
        first_dirty_offset: int,
        upper_bound_offset: int,
        *,
        check_aborted: Callable[[], None],
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int = 0,
    ) -> CleaningResult:
        round_ = _Round.start(self.clock, log, first_dirty_offset, upper_bound_offset, check_aborted)
        if round_.plan is None:
            return round_.empty_result(self.clock, self.name)
        results: list[GroupResult] = []
        map_size = 0
        if round_.plan.groups:
            results, map_size = self._rewrite(round_, thread_id)
        return self._complete(round_, results, map_size, throttle, schedule_delete, thread_id)

    def clean_many(
        self,
        rounds: Sequence[LogRound],
        *,
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int = 0,
    ) -> None:
        """Every log of ``rounds`` in one Spark job (see the module docstring); each ``on_done`` once."""
        pending: list[_Round] = []
        owner: dict[int, LogRound] = {}  # id of a pending round → the request it answers
        for one in rounds:
            try:
                round_ = _Round.start(
                    self.clock, one.log, one.first_dirty_offset, one.upper_bound_offset, one.check_aborted
                )
            except Exception as exc:
                one.on_done(exc)
                continue
            if round_.plan is None:
                one.on_done(round_.empty_result(self.clock, self.name))
            elif not round_.plan.groups:
                self._finish(one, round_, [], 0, throttle, schedule_delete, thread_id)
            else:
                pending.append(round_)
                owner[id(round_)] = one
        settled: set[int] = set()  # ids of the rounds settled while their job still ran

        def settle(round_: _Round, outcome: _LogOutcome | BaseException) -> None:
            settled.add(id(round_))
            if isinstance(outcome, BaseException):
                owner[id(round_)].on_done(outcome)
            else:
                self._finish(owner[id(round_)], round_, *outcome, throttle, schedule_delete, thread_id)

        while len(pending) > 1:
            try:
                outcomes = self._rewrite_many(pending, thread_id, settle)
            except _LogsAborted as exc:
                for round_, error in exc.aborted:
                    owner[id(round_)].on_done(error)
                pending = [
                    r for r in pending if id(r) not in settled and all(r is not a for a, _ in exc.aborted)
                ]
                continue
            except Exception:
                pending = [r for r in pending if id(r) not in settled]
                logger.warning(
                    "One Spark job for %s failed; cleaning each log in a job of its own",
                    ", ".join(str(r.log.topic_partition) for r in pending),
                    exc_info=True,
                )
                break
            for round_, outcome in zip(pending, outcomes, strict=True):
                if outcome is not None:
                    settle(round_, outcome)
            return
        for round_ in pending:  # one log left, or the shared job failed
            one = owner[id(round_)]
            try:
                results, map_size = self._rewrite(round_, thread_id)
            except Exception as exc:
                one.on_done(exc)
                continue
            self._finish(one, round_, results, map_size, throttle, schedule_delete, thread_id)

    def _finish(
        self,
        one: LogRound,
        round_: _Round,
        results: list[GroupResult],
        map_size: int,
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int,
    ) -> None:
        """Swap one log of a shared job in and report it (its failure is its own)."""
        try:
            result = self._complete(round_, results, map_size, throttle, schedule_delete, thread_id)
        except Exception as exc:
            one.on_done(exc)
            return
        one.on_done(result)

    def _complete(
        self,
        round_: _Round,
        results: list[GroupResult],
        map_size: int,
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int,
    ) -> CleaningResult:
        """After the job: stats, throttle, the swap of every rewritten group, the round's log line."""
        log, plan, stats = round_.log, round_.plan_or_fail(), round_.stats
        stats.map_size = map_size
        _record_phases(stats, self.clock, round_.start_wall_ms, results)
        for result in results:
            stats.merge(result.stats)
        if total_bytes := stats.map_bytes_read + stats.bytes_read + stats.bytes_written:
            throttle(total_bytes)
        self._swap_in(log, plan, results, round_.check_aborted, schedule_delete)
        stats.buffer_utilization = (
            kafka_utilization_percent(stats.map_size, self.dedupe_buffer_bytes, self.load_factor) / 100
        )
        stats.all_done(self.clock)
        logger.info(
            "%s",
            stats.summary(
                log_name=str(log.topic_partition),
                first_dirty_offset=plan.first_dirty_offset,
                end_offset=plan.end_offset,
                thread_id=thread_id,
            ),
        )
        if stats.invalid_records:
            logger.warning("\tFound %d invalid messages during compaction.", stats.invalid_records)
        return CleaningResult(plan.end_offset, stats, self.name)

    def _rewrite(self, round_: _Round, thread_id: int) -> _LogOutcome:
        """One log's Spark job: its groups' ``.cleaned`` files written; their metadata, in offset order,
        and the map's size."""
        plan = round_.plan_or_fail()
        tp = round_.log.topic_partition
        (outcome,) = self._run_job(
            [round_],
            thread_id=thread_id,
            check_aborted=round_.check_aborted,
            name=f"{tp} [{plan.first_dirty_offset}, {plan.end_offset})",
        )
        if outcome is None:  # only a job given ``settle_early`` settles a log during the job
            raise RuntimeError(f"{tp}: its round was settled during its job")
        return outcome

    def _rewrite_many(
        self,
        rounds: list[_Round],
        thread_id: int,
        settle: Callable[[_Round, _LogOutcome | BaseException], None],
    ) -> list[_LogOutcome | None]:
        """One Spark job for every log of ``rounds``: per log, its groups' metadata and its map size, or
        None for a log handed to ``settle`` as soon as its own tasks had ended (its abort no longer
        checked)."""
        settled: set[int] = set()

        def check_aborted() -> None:
            aborted: list[tuple[_Round, BaseException]] = []
            for i, round_ in enumerate(rounds):
                if i in settled:
                    continue
                try:
                    round_.check_aborted()
                except CleaningAbortedError as exc:
                    aborted.append((round_, exc))
            if aborted:
                raise _LogsAborted(aborted)

        def settle_early(i: int, outcome: _LogOutcome | BaseException) -> None:
            settled.add(i)
            settle(rounds[i], outcome)

        names = ", ".join(str(r.log.topic_partition) for r in rounds)
        return self._run_job(
            rounds,
            thread_id=thread_id,
            check_aborted=check_aborted,
            name=f"{len(rounds)} logs ({names})",
            settle_early=settle_early,
        )

    def _run_job(
        self,
        rounds: Sequence[_Round],
        *,
        thread_id: int,
        check_aborted: Callable[[], None],
        name: str,
        settle_early: Callable[[int, _LogOutcome | BaseException], None] | None = None,
    ) -> list[_LogOutcome | None]:
        """The round's Spark job: every log's groups cut into ranges (about one task per core in all); a
        log of several ranges is mapped by key hash, one class a range, by its tasks into map files, which
        are removed after the job, whatever happened. Per log, its results and map size; with
        ``settle_early``, a log whose tasks have all ended is handed to it while the job runs (its ticket
        closed, its map files removed), and its entry is None."""
        spark = self._started_session(check_aborted)
        plans = [r.plan_or_fail() for r in rounds]
        tickets: list[JobTicket] = []
        try:
            for round_, plan in zip(rounds, plans, strict=True):
                tickets.append(JobTicket.create(str(round_.log.directory), plan.end_offset))
            job = _Job(rounds, plans, tickets, settle_early)
            return self._run_jobs(spark, job, thread_id, check_aborted, name)
        finally:
            for ticket in tickets:  # a second time (a no-op) unless the jobs raised before their cleanup
                ticket.close()

    def _run_jobs(
        self, spark: SparkSession, job: _Job, thread_id: int, check_aborted: Callable[[], None], name: str
    ) -> list[_LogOutcome | None]:
        context = spark.sparkContext
        self._plan_tasks(job, context.defaultParallelism)
        reports = self._report_channel(context).open_job() if job.settle_early is not None else None

        def run(action: Callable[[], list[T]], what: str) -> list[T]:
            return run_action(
                spark,
                action,
                pool=pool_name(thread_id),
                description=f"logcleaner: {what} {name}",
                check_aborted=check_aborted,
                on_job=self.on_job,
                poll_interval_s=self.poll_interval_s,
                reports=reports,
                on_report=job.on_report,
            )

        try:
            job.delete_scratch_files()  # a complete file is used as found: none may come from elsewhere
            sender = reports.sender if reports is not None else None
            rewritten = context.parallelize(job.items, len(job.items)).mapPartitionsWithIndex(
                rewrite_partition(job.round_tasks, sender)
            )
            rows = run(rewritten.collect, "clean")
        except BaseException:
            job.withdraw_tickets()  # no task writes after this
            job.delete_cleaned()
            raise
        finally:
            if reports is not None:
                reports.close()
            job.withdraw_tickets()
            job.delete_scratch_files()  # before any swap: see partial_maps on these names
        by_slot = {r.slot: r for r in map(GroupResult.from_row, rows)}
        if len(by_slot) != len(rows):  # two tasks cut a log's ranges differently: never swap such a round
            job.delete_cleaned()
            raise RuntimeError(f"the Spark job {name} rewrote some groups twice")
        outcomes: list[_LogOutcome | None] = []
        for i in range(len(job.rounds)):
            try:
                outcomes.append(None if i in job.settled else job.results_of(i, by_slot))
            except BaseException:
                job.delete_cleaned()
                raise
        return outcomes

    def _plan_tasks(self, job: _Job, cores: int) -> None:
        """The job's rewrite tasks (``job.items``) and key class maps: every log's groups cut into ranges."""
        used = 0
        for round_, plan, ticket in zip(job.rounds, job.plans, job.tickets, strict=True):
            slots = list(range(used, used + len(plan.groups)))
            used += len(slots)
            job.round_tasks.append(_round_task(round_.log, plan, slots, ticket.path))
        sizes = [sum(s.size_bytes for g in plan.groups for s in g.segments) for plan in job.plans]
        counts = ranges_per_log(sizes, cores, self.min_range_bytes)
        for i, (round_, plan, task) in enumerate(zip(job.rounds, job.plans, job.round_tasks, strict=True)):
            ranges = balanced_ranges(_group_bytes(plan), list(task.groups), counts[i])
            if max(_range_bytes(task, run) for run in ranges) > _MAX_RANGE_SHARE * sizes[i]:
                ranges = [tuple(task.groups)]  # cutting would not shorten the longest task enough
            splits = self._dirty_splits(round_.log, plan)
            if len(ranges) == 1:
                aborted = plan.map_scan.aborted_batches
                own = map_tasks(i, splits, plan.first_dirty_offset, aborted, _NO_PACKING)
                job.items.append(RewriteItem(i, ranges[0], own[0] if own else None))
                continue
            class_maps: tuple[MapSplit, ...] = ()
            if splits:  # the map by key hash: one class a range, mapped by the rewrite tasks (partial_maps)
                class_maps = tuple(
                    replace(
                        one,
                        blob_path=blob_path(str(round_.log.directory), plan.end_offset, one.key_class),
                        ticket=job.tickets[i].path,
                    )
                    for one in class_tasks(
                        i,
                        splits,
                        plan.first_dirty_offset,
                        plan.map_scan.aborted_batches,
                        key_classes(len(ranges)),
                    )
                )
                job.scratch.extend((i, one.blob_path) for one in class_maps)
            claims = claims_path(str(round_.log.directory), plan.end_offset)
            job.scratch.append((i, claims))
            job.items.extend(
                RewriteItem(
                    i,
                    tuple(task.groups),
                    class_maps=class_maps,
                    range_index=r,
                    ranges=len(ranges),
                    claims_path=claims,
                )
                for r in range(len(ranges))
            )

    def _report_channel(self, context: SparkContext) -> ReportChannel:
        """The session's one accumulator of task reports (a new one after the session restarted)."""
        with self._channel_lock:
            if self._channel is None or self._channel.context is not context:
                self._channel = ReportChannel(context)
            return self._channel

    def _dirty_splits(self, log: PartitionLog, plan: RoundPlan) -> list[SegmentSplit]:
        if not plan.has_dirty_segments:
            return []
        return plan_splits(
            log.directory,
            from_offset=plan.first_dirty_offset,
            until_offset=plan.end_offset,
            max_split_bytes=_WHOLE_SEGMENTS,
        )

    def _started_session(self, check_aborted: Callable[[], None]) -> SparkSession:
        """The session; a start (tens of seconds on a busy machine) runs on its own thread while the round
        keeps calling ``check_aborted``, so a stop does not wait for the JVM."""
        if self.session.is_started:
            return self.session.get()
        outcome: list[SparkSession | BaseException] = []

        def start() -> None:
            try:
                outcome.append(self.session.get())
            except BaseException as exc:  # handed to the round
                outcome.append(exc)

        starter = threading.Thread(target=start, name="logcleaner-spark-start", daemon=True)
        starter.start()
        while starter.is_alive():
            starter.join(self.poll_interval_s)
            check_aborted()
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    def _swap_in(
        self,
        log: PartitionLog,
        plan: RoundPlan,
        results: list[GroupResult],
        check_aborted: Callable[[], None],
        schedule_delete: ScheduleDelete,
    ) -> None:
        """Each rewritten group in offset order, each after an abort check (Kafka ``cleanSegments``)."""
        for i, (group, result) in enumerate(zip(plan.groups, results, strict=True)):
            if not result.is_rewritten:
                continue
            try:
                check_aborted()  # the last chance to stop before the swap publishes the group
                cleaned = LogSegment(
                    log.directory,
                    group.base_offset,
                    config=log.config,
                    created_ms=plan.now_ms,
                    suffix=CLEANED_SUFFIX,
                )
            except BaseException:
                _delete_cleaned(log.directory, plan.groups[i:])
                raise
            logger.debug(
                "%s: swapping in %s for segment(s) %s",
                log.topic_partition,
                cleaned.log_path,
                [s.base_offset for s in group.segments],
            )
            try:
                doomed = log.replace_segments([cleaned], group.segments)
            except BaseException:  # this group's files are the loader's to finish or drop (§10.1)
                _delete_cleaned(log.directory, plan.groups[i + 1 :])
                raise
            if doomed:  # retention may have removed (and will delete) them all meanwhile
                schedule_delete(log.config.file_delete_delay_ms, partial(delete_segments, doomed))


class _LogsAborted(CleaningAbortedError):
    """Some logs of a shared job were aborted: the job is cancelled and runs again without them."""

    def __init__(self, aborted: list[tuple[_Round, BaseException]]) -> None:
        super().__init__(", ".join(str(error) for _round, error in aborted))
        self.aborted = aborted


class _Job:
    """One Spark job's logs on the driver: their plans, tickets, rewrite tasks and map files, and which logs
    were settled while the job ran. Used on the worker's thread only (``on_report`` runs there too)."""

    def __init__(
        self,
        rounds: Sequence[_Round],
        plans: list[RoundPlan],
        tickets: list[JobTicket],
        settle_early: Callable[[int, _LogOutcome | BaseException], None] | None,
    ) -> None:
        self.rounds = rounds
        self.plans = plans
        self.tickets = tickets
        self.settle_early = settle_early
        self.round_tasks: list[RoundTask] = []
        self.items: list[RewriteItem] = []  # rewrite partition p cleans the groups of items[p]
        self.scratch: list[tuple[int, str]] = []  # (log, path): its map and claims files (removed after)
        self.settled: set[int] = set()
        self._reported: dict[int, list[Mapping[str, object]]] = {}
        self._reports: dict[int, int] = {}

    def on_report(self, report: object) -> None:
        """A task's ``(log, rows)`` (``task_reports``): once every task of that log has reported, the log
        is settled now, its ticket withdrawn (no attempt of its tasks writes after this) and its map files
        removed."""
        if self.settle_early is None:
            return
        log, rows = cast(tuple[int, list[Mapping[str, object]]], report)  # what rewrite_partition sends
        self._reported.setdefault(log, []).extend(rows)
        self._reports[log] = self._reports.get(log, 0) + 1
        if self._reports[log] < sum(1 for item in self.items if item.log == log) or log in self.settled:
            return
        self.settled.add(log)
        self.tickets[log].close()
        self.delete_scratch_files(log)
        by_slot = {r.slot: r for r in map(GroupResult.from_row, self._reported[log])}
        outcome: _LogOutcome | BaseException
        try:
            if len(by_slot) != len(self._reported[log]):
                tp = self.rounds[log].log.topic_partition
                raise RuntimeError(f"{tp}: two of its Spark tasks rewrote the same groups")
            outcome = self.results_of(log, by_slot)
        except Exception as exc:
            _delete_cleaned(self.rounds[log].log.directory, self.plans[log].groups)
            outcome = exc
        self.settle_early(log, outcome)

    def results_of(self, log: int, by_slot: Mapping[int, GroupResult]) -> _LogOutcome:
        return _results_of(self.rounds[log].log, self.plans[log], list(self.round_tasks[log].groups), by_slot)

    def withdraw_tickets(self) -> None:
        for ticket in self.tickets:
            ticket.close()

    def delete_cleaned(self) -> None:
        """The ``.cleaned`` files of every log not settled yet."""
        for i, (round_, plan) in enumerate(zip(self.rounds, self.plans, strict=True)):
            if i not in self.settled:
                _delete_cleaned(round_.log.directory, plan.groups)

    def delete_scratch_files(self, log: int | None = None) -> None:
        """The key class and claims files of ``log``, or of every log not settled yet."""
        for owner, path in self.scratch:
            if owner == log or (log is None and owner not in self.settled):
                Path(path).unlink(missing_ok=True)


@dataclass(slots=True)
class _Round:
    """One log's round on the driver: its plan (None: nothing to clean), stats and abort check."""

    log: PartitionLog
    plan: RoundPlan | None
    stats: CleanerStats
    start_wall_ms: int
    check_aborted: Callable[[], None]
    first_dirty_offset: int

    @classmethod
    def start(
        cls,
        clock: Clock,
        log: PartitionLog,
        first_dirty_offset: int,
        upper_bound_offset: int,
        check_aborted: Callable[[], None],
    ) -> _Round:
        stats = CleanerStats.start(clock)
        start_wall_ms = time.time_ns() // 1_000_000
        check_aborted()
        plan = plan_round(log, first_dirty_offset, upper_bound_offset, clock.now_ms())
        if plan is not None:
            stats.map_bytes_read = plan.map_scan.bytes_read
            stats.map_records_read = plan.map_scan.records_read
        return cls(log, plan, stats, start_wall_ms, check_aborted, first_dirty_offset)

    def plan_or_fail(self) -> RoundPlan:
        if self.plan is None:
            raise RuntimeError(f"{self.log.topic_partition}: a round with nothing to clean has no plan")
        return self.plan

    def empty_result(self, clock: Clock, engine: str) -> CleaningResult:
        self.stats.map_done(clock)
        self.stats.all_done(clock)
        return CleaningResult(self.first_dirty_offset, self.stats, engine)


def _results_of(
    log: PartitionLog, plan: RoundPlan, slots: list[int], by_slot: Mapping[int, GroupResult]
) -> _LogOutcome:
    """One log's group results in offset order, and its map size; an error if a group reported nothing."""
    missing = [g.base_offset for g, s in zip(plan.groups, slots, strict=True) if s not in by_slot]
    if missing:
        _delete_cleaned(log.directory, plan.groups)
        raise RuntimeError(
            f"{log.topic_partition}: the Spark job reported no result for groups based at {missing}"
        )
    results = [by_slot[s] for s in slots]
    return results, max((r.lookup_keys for r in results), default=0)  # the first group's: the whole map


def _round_task(log: PartitionLog, plan: RoundPlan, slots: list[int], ticket: str) -> RoundTask:
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


def ranges_per_log(sizes: Sequence[int], cores: int, min_range_bytes: int) -> list[int]:
    """How many ranges (rewrite tasks) each log of a job is cut into: one each, then, while the job has
    fewer than ``cores``, one more for the log with the most bytes a range, as long as its ranges stay at
    least ``min_range_bytes``. Many logs: one task each, no blob file; one large log: about one a core."""
    counts = [1] * len(sizes)
    for _ in range(cores - len(sizes)):
        best = max(range(len(sizes)), key=lambda i: sizes[i] / counts[i], default=None)
        if best is None or sizes[best] // (counts[best] + 1) < min_range_bytes:
            break
        counts[best] += 1
    return counts


def key_classes(ranges: int) -> int:
    """How many key classes a log of ``ranges`` rewrite ranges is mapped in: one per two ranges, as a class's
    map takes two cores when its puts run on a thread of their own (``native.puts_on_own_thread``)."""
    return max(1, (ranges + 1) // 2) if puts_pipelined() else ranges


def _group_bytes(plan: RoundPlan) -> list[int]:
    return [sum(s.size_bytes for s in g.segments) for g in plan.groups]


def _range_bytes(task: RoundTask, run: tuple[int, ...]) -> int:
    return sum(sum(task.groups[slot].sizes_bytes) for slot in run)


def _record_phases(stats: CleanerStats, clock: Clock, start_wall_ms: int, results: list[GroupResult]) -> None:
    """Map build ends when the first rewrite task starts (the stage boundary the job's tasks show)."""
    first_task_ms = min((r.started_ms for r in results), default=None)
    if first_task_ms is None:
        stats.map_done(clock)
        return
    stats.map_done_monotonic_ms = stats.start_monotonic_ms + max(first_task_ms - start_wall_ms, 0)


def _delete_cleaned(directory: Path, groups: tuple[GroupPlan, ...]) -> None:
    """Remove the ``.cleaned`` files the tasks may have written for ``groups`` (none are live segments)."""
    for group in groups:
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            segment_path(directory, group.base_offset, suffix + CLEANED_SUFFIX).unlink(missing_ok=True)

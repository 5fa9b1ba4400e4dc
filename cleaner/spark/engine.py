"""``log.cleaner.engine=spark``: a cleaning round's heavy work as Spark tasks, swapped in by the driver.

A round, as ``Cleaner.clean`` runs it but with the records handled in Spark:

1. driver: ``plan_round`` (upper bound, groups, each group's aborted txns and starting transaction state,
   active producers, the dirty section's aborted data batches; one pass over batch headers);
2. the log's groups are cut into consecutive ranges of about equal bytes, one rewrite task each
   (``jobs``: about one task per core over the job, ranges of at least ``min_range_bytes``; many logs
   get one each). A log of one range needs one Spark job: its task maps its dirty segments itself in C,
   in offset order, then ``clean_group`` rewrites its groups with that map, as the in-process round does.
   A log of several ranges is mapped by key hash, in the same job: it has one task per range and a key
   class per two ranges, at most four (``key_classes``: a class's map puts on a thread of its own, two
   cores; each class reads the whole dirty section); each task makes sure every class's map file exists
   (the first task to reach a class maps it in C over the whole dirty section and writes its blob and
   superseded bitmap to a scratch file in the log's dir, under that file's lock; ``partial_maps``), ORs
   every class's bitmap and keeps their blobs for the lookups the bits cannot answer, then takes the log's
   groups one at a time, the costliest free one first by what each keeps (``task_files``), and cleans
   them (only paths go through Spark; no exchange, no aggregation by key, no Python object per record),
   writing ``<base>.log.cleaned`` (``rewrite``); only per-group metadata returns. A round ticket
   (``task_files``) guarantees that no task of a cancelled or failed job writes after the driver removed
   the tasks' files; the scratch files are removed after the job, whatever happened, before any swap;
3. driver: in offset order, ``check_aborted`` then ``log.replace_segments`` (Kafka's .cleaned → .swap →
   .deleted protocol, crash-safe as in ``cleaner.compaction.cleaner``) and ``schedule_delete`` of the
   replaced files.

An abort or an error before a group is swapped deletes that group's ``.cleaned`` files and every later
one's, then re-raises; groups already swapped stay (each is a complete cleaning). Throttling is coarse:
``throttle`` hears the tasks' bytes read and written once the job is done (and the map pass's bytes, which
the driver replays), so the round's average rate obeys ``log.cleaner.io.max.bytes.per.second`` while the
jobs themselves run unthrottled. Timings: map build = from the round's start until the first rewrite task
has its lookup (tasks report wall-clock times), rewrite = the rest. The driver never holds the key map.

Several logs in one job (``clean_many``, up to ``log.cleaner.spark.max.logs.per.job`` logs a worker took
together): each log is planned on its own; the tasks of every log make the one job (a log's map files
go only to its own tasks; with more logs than cores, one task a core takes the logs one after the other,
``task_files``, and all clean the smallest together, ``jobs``); each log is swapped in and reported
(``on_done``) on its own as soon as its own items have ended (``task_files``), while the job's other
tasks still run. An abort of one log (seen by the job's poll) cancels the job and runs it again without
that log; a job that fails is run again as one job per log (those not settled yet), so a log whose data
breaks its tasks fails alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from pyspark.sql import SparkSession

from cleaner.compaction.cleaner import CleaningResult, ScheduleDelete, delete_segments
from cleaner.compaction.key_map_budget import KeyMapBudget
from cleaner.compaction.offset_map import kafka_utilization_percent
from cleaner.compaction.stats import CleanerStats
from cleaner.engine import LogRound, round_bytes, spark_start_failure
from cleaner.errors import CleaningAbortedError, EngineUnavailableError
from cleaner.spark.actions import run_action
from cleaner.spark.jobs import (
    DEFAULT_MIN_RANGE_BYTES,
    JobLogs,
    LogOutcome,
    delete_cleaned,
    plan_tasks,
    rows_by_slot,
)
from cleaner.spark.rewrite import GroupResult, rewrite_partition
from cleaner.spark.round_plan import RoundPlan, plan_round
from cleaner.spark.session import SparkSessionHolder, pool_name
from cleaner.spark.task_files import JobTicket
from service.base.clock import Clock
from service.base.wording import human_bytes
from service.storage.log import PartitionLog
from service.storage.log_files import CLEANED_SUFFIX
from service.storage.segment import LogSegment

__all__ = ["SparkEngine", "time_from_own_tasks"]

T = TypeVar("T")

logger = logging.getLogger(__name__)


class SparkEngine:
    """Cleans on Spark; the SparkSession starts at the first round and lives until ``close``.

    ``spark_conf``: every ``spark.*`` key (``BrokerConfig.spark_conf``), ``spark.master`` included; or pass
    ``session`` to share a ``SparkSessionHolder`` (tests share one per test session). ``dedupe_buffer_bytes``
    and ``load_factor`` only feed ``buffer_utilization`` (Kafka's 24-bytes-per-key figure). ``on_job`` hears
    each Spark action's duration in seconds. ``key_map_budget`` (a thread's share of the dedupe buffer) bounds
    each task's key map as it bounds the in-process round's (``partial_maps``). Thread-safe: workers call
    ``clean`` concurrently, each in the FAIR pool of its ``thread_id``. Executors read and write segment files
    themselves: ``local[*]`` and ``local-cluster`` share this machine's disk; on a real cluster every executor
    must see the log dirs at the same path (shared storage), and the package must be installed on every node.
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
        key_map_budget: KeyMapBudget | None = None,
    ) -> None:
        self.clock = clock
        self.session = session or SparkSessionHolder(spark_conf)
        self.dedupe_buffer_bytes = dedupe_buffer_bytes
        self.load_factor = load_factor
        self.on_job = on_job
        self.min_range_bytes = min_range_bytes
        self.poll_interval_s = poll_interval_s
        self.key_map_budget = key_map_budget

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

        def settle(round_: _Round, outcome: LogOutcome | BaseException) -> None:
            settled.add(id(round_))
            if isinstance(outcome, BaseException):
                owner[id(round_)].on_done(outcome)
            else:
                self._finish(
                    owner[id(round_)], round_, *outcome, throttle, schedule_delete, thread_id, shared=True
                )

        while len(pending) > 1:
            try:
                outcomes = self._rewrite_many(pending, thread_id, settle, settled)
            except _LogsAborted as exc:
                for round_, error in exc.aborted:
                    owner[id(round_)].on_done(error)
                pending = [
                    r for r in pending if id(r) not in settled and all(r is not a for a, _ in exc.aborted)
                ]
                continue
            except EngineUnavailableError:
                raise  # no round ran: the caller runs them on the other engine
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
            except EngineUnavailableError:
                raise  # this round and the rest did not run: the caller runs them on the other engine
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
        *,
        shared: bool = False,
    ) -> None:
        """Swap one log of a shared job in and report it (its failure is its own)."""
        try:
            result = self._complete(
                round_, results, map_size, throttle, schedule_delete, thread_id, shared=shared
            )
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
        *,
        shared: bool = False,
    ) -> CleaningResult:
        """After the job: stats, throttle, the swap of every rewritten group, the round's log line. A round
        that ``shared`` its job with other logs is timed from its own first task (its lookup included), not
        from the job's start, so that its stats are its own."""
        log, plan, stats = round_.log, round_.plan_or_fail(), round_.stats
        stats.map_size = map_size
        _record_phases(stats, self.clock, round_.start_wall_ms, results)
        if shared:
            time_from_own_tasks(stats, round_.start_wall_ms, results)
        for result in results:
            stats.merge(result.stats)
        stats.spill_classes = max((r.spill_classes for r in results), default=0)
        if stats.spill_classes:
            logger.info(
                "%s: its key map passed the thread's share and spilled to %d classes",
                log.topic_partition,
                stats.spill_classes,
            )
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

    def _rewrite(self, round_: _Round, thread_id: int) -> LogOutcome:
        """One log's Spark job: its groups' ``.cleaned`` files written; their metadata, in offset order,
        and the map's size."""
        plan = round_.plan_or_fail()
        tp = round_.log.topic_partition
        (outcome,) = self._run_job(
            [round_],
            thread_id=thread_id,
            check_aborted=round_.check_aborted,
            name=(
                f"{tp} [{plan.first_dirty_offset}, {plan.end_offset}), "
                f"{human_bytes(round_bytes(round_.log, plan.upper_bound))}"
            ),
        )
        if outcome is None:  # only a job given ``settle_early`` settles a log during the job
            raise RuntimeError(f"{tp}: its round was settled during its job")
        return outcome

    def _rewrite_many(
        self,
        rounds: list[_Round],
        thread_id: int,
        settle: Callable[[_Round, LogOutcome | BaseException], None],
        settled: set[int],
    ) -> list[LogOutcome | None]:
        """One Spark job for every log of ``rounds``: per log, its groups' metadata and its map size, or
        None for a log handed to ``settle`` as soon as its own tasks had ended (``settle`` adds its id to
        ``settled``, and its abort is no longer checked)."""

        def check_aborted() -> None:
            aborted: list[tuple[_Round, BaseException]] = []
            for round_ in rounds:
                if id(round_) in settled:
                    continue
                try:
                    round_.check_aborted()
                except CleaningAbortedError as exc:
                    aborted.append((round_, exc))
            if aborted:
                raise _LogsAborted(aborted)

        def settle_early(i: int, outcome: LogOutcome | BaseException) -> None:
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
        settle_early: Callable[[int, LogOutcome | BaseException], None] | None = None,
    ) -> list[LogOutcome | None]:
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
            job = JobLogs([r.log for r in rounds], plans, tickets, settle_early)
            return self._run_jobs(spark, job, thread_id, check_aborted, name)
        finally:
            for ticket in tickets:  # a second time (a no-op) unless the jobs raised before their cleanup
                ticket.close()

    def _run_jobs(
        self, spark: SparkSession, job: JobLogs, thread_id: int, check_aborted: Callable[[], None], name: str
    ) -> list[LogOutcome | None]:
        context = spark.sparkContext
        plan_tasks(job, context.defaultParallelism, self.min_range_bytes, self.key_map_budget)
        reports = job.reports()

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
            rewritten = context.parallelize(range(job.partitions), job.partitions).mapPartitionsWithIndex(
                rewrite_partition(job.round_tasks, job.items)
            )
            rows = run(rewritten.collect, "clean")
        except BaseException:
            job.withdraw_tickets()  # no task writes after this
            job.delete_cleaned()
            raise
        finally:
            job.withdraw_tickets()
            job.delete_scratch_files()  # before any swap: see partial_maps on these names
        try:
            by_slot = rows_by_slot(rows, f"the Spark job {name}")
            return [None if i in job.settled else job.results_of(i, by_slot) for i in range(len(job.logs))]
        except BaseException:
            job.delete_cleaned()
            raise

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
        if isinstance(outcome[0], CleaningAbortedError):
            raise outcome[0]
        if isinstance(outcome[0], BaseException):
            master = self.session.conf.get("spark.master", "local[*]")
            cause = spark_start_failure(outcome[0])
            raise EngineUnavailableError(f"spark.master={master}: {cause}") from outcome[0]
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
                delete_cleaned(log.directory, plan.groups[i:])
                raise
            logger.debug(
                "%s: swapping in %s for segment(s) %s",
                log.topic_partition,
                cleaned.log_path,
                [s.base_offset for s in group.segments],
            )
            try:
                doomed = log.replace_segments([cleaned], group.segments)
            except BaseException:  # this group's files are the loader's to finish or drop
                delete_cleaned(log.directory, plan.groups[i + 1 :])
                raise
            if doomed:  # retention may have removed (and will delete) them all meanwhile
                schedule_delete(log.config.file_delete_delay_ms, partial(delete_segments, doomed))


class _LogsAborted(CleaningAbortedError):
    """Some logs of a shared job were aborted: the job is cancelled and runs again without them."""

    def __init__(self, aborted: list[tuple[_Round, BaseException]]) -> None:
        super().__init__(", ".join(str(error) for _round, error in aborted))
        self.aborted = aborted


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


def time_from_own_tasks(stats: CleanerStats, start_wall_ms: int, results: Sequence[GroupResult]) -> None:
    """A round that shared its job: its time starts at its own first task's start (its lookup included),
    not at the job's, which waited for the other logs' tasks too."""
    if results:
        own_start_ms = min(r.started_ms - r.lookup_ms for r in results)
        stats.start_monotonic_ms += max(own_start_ms - start_wall_ms, 0)


def _record_phases(stats: CleanerStats, clock: Clock, start_wall_ms: int, results: list[GroupResult]) -> None:
    """Map build ends when the first rewrite task starts (the stage boundary the job's tasks show)."""
    first_task_ms = min((r.started_ms for r in results), default=None)
    if first_task_ms is None:
        stats.map_done(clock)
        return
    stats.map_done_monotonic_ms = stats.start_monotonic_ms + max(first_task_ms - start_wall_ms, 0)

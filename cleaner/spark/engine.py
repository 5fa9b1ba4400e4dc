"""``log.cleaner.engine=spark``: a cleaning round's heavy work as one Spark job, swapped in by the driver.

A round, as ``Cleaner.clean`` runs it but with the records handled in Spark:

1. driver: ``plan_round`` (upper bound, groups, each group's aborted txns and starting transaction state,
   active producers; one pass over batch headers);
2. one Spark action: scan the segments below the end (``kafka-log`` source), the key map as a hash
   aggregation over the exact key bytes (``key_map``), then one task per group runs ``clean_group`` with
   that group's lookup and writes ``<base>.log.cleaned`` (``rewrite``); only per-group metadata returns;
3. driver: in offset order, ``check_aborted`` then ``log.replace_segments`` (Kafka's .cleaned → .swap →
   .deleted protocol, crash-safe as in ``cleaner.cleaner``) and ``schedule_delete`` of the replaced files.

An abort or an error before a group is swapped deletes that group's ``.cleaned`` files and every later
one's, then re-raises; groups already swapped stay (each is a complete cleaning). Throttling is coarse:
``throttle`` hears the tasks' bytes read and written once the job is done (and the map pass's bytes, which
the driver replays), so the round's average rate obeys ``log.cleaner.io.max.bytes.per.second`` while the
job itself runs unthrottled. Timings: map build = from the round's start to the first rewrite task's
start (tasks report wall-clock times), rewrite = the rest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path

from pyspark.sql import SparkSession

from cleaner.cleaner import CleaningResult, ScheduleDelete, delete_segments
from cleaner.offset_map import kafka_utilization_percent
from cleaner.spark.jobs import run_action
from cleaner.spark.key_map import superseded_rows
from cleaner.spark.rewrite import GroupResult, GroupTask, RoundTask, rewrite_udtf
from cleaner.spark.round_plan import GroupPlan, RoundPlan, plan_round
from cleaner.spark.segment_splits import DEFAULT_SPLIT_BYTES
from cleaner.spark.session import SparkSessionHolder, pool_name
from cleaner.spark.slots import slots_for
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
        max_split_bytes: int = DEFAULT_SPLIT_BYTES,
        poll_interval_s: float = 0.1,
    ) -> None:
        self.clock = clock
        self.session = session or SparkSessionHolder(spark_conf)
        self.dedupe_buffer_bytes = dedupe_buffer_bytes
        self.load_factor = load_factor
        self.on_job = on_job
        self.max_split_bytes = max_split_bytes
        self.poll_interval_s = poll_interval_s

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
        stats = CleanerStats.start(self.clock)
        start_wall_ms = time.time_ns() // 1_000_000
        check_aborted()
        plan = plan_round(log, first_dirty_offset, upper_bound_offset, self.clock.now_ms())
        if plan is None:
            stats.map_done(self.clock)
            stats.all_done(self.clock)
            return CleaningResult(first_dirty_offset, stats, self.name)
        stats.map_bytes_read = plan.map_scan.bytes_read
        stats.map_records_read = plan.map_scan.records_read
        results: list[GroupResult] = []
        if plan.groups:
            results, stats.map_size = self._rewrite(log, plan, check_aborted, thread_id)
        _record_phases(stats, self.clock, start_wall_ms, results)
        for result in results:
            stats.merge(result.stats)
        if total_bytes := stats.map_bytes_read + stats.bytes_read + stats.bytes_written:
            throttle(total_bytes)
        self._swap_in(log, plan, results, check_aborted, schedule_delete)
        stats.buffer_utilization = (
            kafka_utilization_percent(stats.map_size, self.dedupe_buffer_bytes, self.load_factor) / 100
        )
        stats.all_done(self.clock)
        logger.info(
            "%s",
            stats.summary(
                log_name=str(log.topic_partition),
                first_dirty_offset=first_dirty_offset,
                end_offset=plan.end_offset,
                thread_id=thread_id,
            ),
        )
        if stats.invalid_records:
            logger.warning("\tFound %d invalid messages during compaction.", stats.invalid_records)
        return CleaningResult(plan.end_offset, stats, self.name)

    def _rewrite(
        self, log: PartitionLog, plan: RoundPlan, check_aborted: Callable[[], None], thread_id: int
    ) -> tuple[list[GroupResult], int]:
        """The Spark job: every group's ``.cleaned`` files written; their metadata, in offset order."""
        spark = self._started_session(check_aborted)
        slots = slots_for(len(plan.groups))
        rows = superseded_rows(spark, plan, log.directory, slots, max_split_bytes=self.max_split_bytes)
        rewrite = rewrite_udtf(_round_task(log, plan, slots))
        tp = log.topic_partition
        try:
            collected = run_action(
                spark,
                rewrite(rows.asTable()).collect,
                pool=pool_name(thread_id),
                description=f"logcleaner: clean {tp} [{plan.first_dirty_offset}, {plan.end_offset})",
                check_aborted=check_aborted,
                on_job=self.on_job,
                poll_interval_s=self.poll_interval_s,
            )
        except BaseException:
            _delete_cleaned(log.directory, plan.groups)
            raise
        by_slot = {r.slot: r for r in (GroupResult.from_row(row.asDict()) for row in collected)}
        missing = [g.base_offset for g, s in zip(plan.groups, slots, strict=True) if s not in by_slot]
        if missing:
            _delete_cleaned(log.directory, plan.groups)
            raise RuntimeError(f"{tp}: the Spark job reported no result for groups based at {missing}")
        results = [by_slot[s] for s in slots]
        return results, sum(r.mapped_keys for r in results)

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


def _round_task(log: PartitionLog, plan: RoundPlan, slots: list[int]) -> RoundTask:
    return RoundTask(
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


def _record_phases(stats: CleanerStats, clock: Clock, start_wall_ms: int, results: list[GroupResult]) -> None:
    """Map build ends when the first rewrite task starts (the only boundary a fused job shows)."""
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

"""Several logs in one Spark job (``SparkEngine.clean_many``, ``log.cleaner.spark.max.logs.per.job``):
byte-identical to the in-process engine, one job for all, a corrupt log failing alone, an abort of one log
leaving the others cleaned; and the cleaner's workers taking the filthiest logs together."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import cast

import pytest

from cleaner.compaction.cleaner import CleaningResult
from cleaner.compaction.key_map_budget import KeyMapBudget
from cleaner.compaction.stats import CleanerStats
from cleaner.engine import InProcessEngine, LogRound, PerRoundEngine
from cleaner.errors import CleaningAbortedError
from cleaner.pool.log_cleaner import LogCleaner
from cleaner.spark import engine as spark_engine
from cleaner.spark import jobs as spark_jobs
from cleaner.spark.engine import SparkEngine, time_from_own_tasks
from cleaner.spark.jobs import DEFAULT_MIN_RANGE_BYTES, JobLogs, LogOutcome, plan_tasks
from cleaner.spark.rewrite import GroupResult, rewrite_partition
from cleaner.spark.round_plan import plan_round
from cleaner.spark.session import SparkSessionHolder
from cleaner.spark.task_files import JobTicket, take, ticket_path, write_report
from service.base.clock import ManualClock
from service.config.broker_config import BrokerConfig
from service.config.topic_store import TopicConfigStore
from service.core.cleanable import log_to_clean
from service.core.engine_choice import EngineChoice
from service.core.tasks import DeferredTasks
from service.shell.node import build_compacted_log_manager, build_log_cleaner
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log import PartitionLog
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.cleaner.helpers import compact_config
from tests.cleaner.spark.fixed_logs import mixed_ops
from tests.cleaner.spark.random_logs import START_MS, Writer, build_twins, files

SEGMENT_BYTES = (600, 1024, 4096)


def run_now(_delay_ms: int, task: Callable[[], None]) -> None:
    task()


def no_throttle(_bytes: int) -> None:
    return None


def twin_logs(root: Path) -> list[tuple[Writer, Writer]]:
    """Three (oracle, spark) pairs of byte-identical logs, each pair with its own segment size."""
    pairs = []
    for i, segment_bytes in enumerate(SEGMENT_BYTES):
        oracle, spark = build_twins(
            root / f"log{i}", compact_config(segment_bytes=segment_bytes), mixed_ops()
        )
        assert files(oracle.log.directory) == files(spark.log.directory)
        pairs.append((oracle, spark))
    return pairs


def six_logs(root: Path) -> list[tuple[Writer, Writer]]:
    """``twin_logs`` twice: more logs to clean than ``local[2]`` has cores, so its tasks take them in
    turn (``task_files``)."""
    return twin_logs(root / "a") + twin_logs(root / "b")


def corrupt_last_batch(log: PartitionLog, segment: int = 2) -> None:
    victim = log.segments[segment].log_path
    data = bytearray(victim.read_bytes())
    data[-3] ^= 0xFF  # inside the last batch's records: its CRC no longer matches
    victim.write_bytes(bytes(data))


def clean_many(
    engine: SparkEngine,
    logs: list[PartitionLog],
    checks: list[Callable[[], None]] | None = None,
    hooks: Mapping[int, Callable[[], None]] | None = None,
) -> list[CleaningResult | BaseException]:
    """One ``clean_many`` of every log from 0 up to its active segment; what each ``on_done`` got.
    ``hooks[i]`` runs right after log ``i``'s ``on_done``."""
    ended: dict[int, CleaningResult | BaseException] = {}

    def reporter(i: int) -> Callable[[CleaningResult | BaseException], None]:
        def report(outcome: CleaningResult | BaseException) -> None:
            assert i not in ended, "on_done is called once per log"
            ended[i] = outcome
            if hooks and i in hooks:
                hooks[i]()

        return report

    rounds = [
        LogRound(log, 0, log.active_segment.base_offset, checks[i] if checks else (lambda: None), reporter(i))
        for i, log in enumerate(logs)
    ]
    engine.clean_many(rounds, throttle=no_throttle, schedule_delete=run_now)
    assert sorted(ended) == list(range(len(logs)))
    return [ended[i] for i in range(len(logs))]


def oracle_round(log: PartitionLog, clock: ManualClock) -> CleaningResult:
    return InProcessEngine(clock).clean(
        log,
        0,
        log.active_segment.base_offset,
        check_aborted=lambda: None,
        throttle=no_throttle,
        schedule_delete=run_now,
    )


def test_several_logs_in_one_job_equal_the_in_process_engine(
    tmp_path: Path, spark_holder: SparkSessionHolder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More logs than cores: two tasks, each taking the logs one after the other (``task_files.take``), then
    both cleaning the smallest, cut into two ranges (``jobs.shared_log``)."""
    pairs = six_logs(tmp_path)
    jobs: list[float] = []
    planned: list[JobLogs] = []

    def plan_tasks(job: JobLogs, cores: int, min_range_bytes: int, budget: KeyMapBudget | None) -> None:
        spark_jobs.plan_tasks(job, cores, min_range_bytes, budget)
        planned.append(job)

    monkeypatch.setattr(spark_engine, "plan_tasks", plan_tasks)
    engine = SparkEngine(clock=ManualClock(START_MS), session=spark_holder, on_job=jobs.append)
    results = clean_many(engine, [spark.log for _oracle, spark in pairs])
    assert len(jobs) == 1, "one Spark job cleaned every log"
    (job,) = planned
    assert len(job.items) > job.partitions == 2
    assert all(item.report_path for item in job.items)
    shared = [item for item in job.items if not item.taken_path]
    assert [(item.log, item.range_index, item.ranges) for item in shared] == [
        (shared[0].log, 0, 2),
        (shared[0].log, 1, 2),
    ]
    assert job.items[-2:] == shared, "the shared log is left to the end"
    assert len(job.items) == len(job.logs) + 1
    for (oracle, spark), result in zip(pairs, results, strict=True):
        expected = oracle_round(oracle.log, oracle.clock)
        assert isinstance(result, CleaningResult), result
        assert (result.end_offset, result.engine) == (expected.end_offset, "spark")
        assert result.stats.records_retained == expected.stats.records_retained
        assert result.stats.map_size == expected.stats.map_size
        assert files(spark.log.directory) == files(oracle.log.directory)


def test_a_corrupt_log_fails_alone_and_the_others_are_cleaned(
    tmp_path: Path, spark_holder: SparkSessionHolder
) -> None:
    """Six logs on two cores (tasks taking the logs in turn): the corrupt one fails alone."""
    pairs = six_logs(tmp_path)
    broken = pairs[1][1].log
    corrupt_last_batch(broken)
    before = files(broken.directory)
    engine = SparkEngine(clock=ManualClock(START_MS), session=spark_holder)
    results = clean_many(engine, [spark.log for _oracle, spark in pairs])
    assert isinstance(results[1], Exception) and "CRC mismatch" in str(results[1])
    assert files(broken.directory) == before, "the corrupt log is left as it was"
    for i in (0, 2, 3, 4, 5):
        oracle, spark = pairs[i]
        oracle_round(oracle.log, oracle.clock)
        assert isinstance(results[i], CleaningResult), results[i]
        assert files(spark.log.directory) == files(oracle.log.directory)


def test_an_abort_of_one_log_during_the_job_leaves_the_others_cleaned(
    tmp_path: Path, spark_holder: SparkSessionHolder
) -> None:
    pairs = six_logs(tmp_path)
    victim = pairs[0][1].log
    before = files(victim.directory)
    checks = 0

    def abort_once_running() -> None:  # its 1st check is before the job; from the 3rd, the job runs
        nonlocal checks
        checks += 1
        if checks >= 3:
            raise CleaningAbortedError(f"cleaning of {victim.topic_partition} was aborted")

    jobs: list[float] = []
    engine = SparkEngine(
        clock=ManualClock(START_MS), session=spark_holder, on_job=jobs.append, poll_interval_s=0.01
    )
    results = clean_many(
        engine, [spark.log for _o, spark in pairs], [abort_once_running] + [lambda: None] * (len(pairs) - 1)
    )
    assert isinstance(results[0], CleaningAbortedError)
    assert files(victim.directory) == before
    assert not [p for p in victim.directory.iterdir() if p.name.endswith(".cleaned")]
    assert len(jobs) == 2, "the shared job was cancelled and run again without the aborted log"
    for oracle, spark in pairs[1:]:
        oracle_round(oracle.log, oracle.clock)
        assert files(spark.log.directory) == files(oracle.log.directory)


class HeldTicket:
    """An exclusive lock on the ticket file of a log's next Spark job (``task_files``): that log's tasks
    wait for it. Released by ``release``, or after 20 s whatever happens (a test must not hang)."""

    def __init__(self, log: PartitionLog) -> None:
        path = ticket_path(str(log.directory), log.active_segment.base_offset)
        self._fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)  # the driver's ticket reuses this file
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        self._lock = threading.Lock()
        self.is_released = False
        self._timer = threading.Timer(20.0, self.release)
        self._timer.start()

    def release(self) -> None:
        with self._lock:
            if not self.is_released:
                self.is_released = True
                os.close(self._fd)

    def __enter__(self) -> HeldTicket:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._timer.cancel()
        self.release()


def test_each_log_is_swapped_in_as_soon_as_its_own_tasks_end(
    tmp_path: Path, spark_holder: SparkSessionHolder
) -> None:
    """The second log's task waits for its ticket, held here until the first log is settled: the first
    log must be swapped in and reported while the shared job still runs."""
    pairs = twin_logs(tmp_path)
    context = spark_holder.get().sparkContext
    settled_while_held: list[bool] = []
    jobs: list[float] = []
    engine = SparkEngine(clock=ManualClock(START_MS), session=spark_holder, on_job=jobs.append)
    with HeldTicket(pairs[1][1].log) as held:

        def first_settled() -> None:
            settled_while_held.append(
                not held.is_released and bool(context.statusTracker().getActiveJobsIds())
            )
            held.release()

        results = clean_many(engine, [spark.log for _oracle, spark in pairs], hooks={0: first_settled})
    assert settled_while_held == [True], "the first log was settled only after the job"
    assert len(jobs) == 1
    for (oracle, spark), result in zip(pairs, results, strict=True):
        assert isinstance(result, CleaningResult), result
        oracle_round(oracle.log, oracle.clock)
        assert files(spark.log.directory) == files(oracle.log.directory)


def test_a_log_settled_during_a_job_that_then_fails_stays_settled(
    tmp_path: Path, spark_holder: SparkSessionHolder
) -> None:
    """The first log is settled; then its abort check fails (as a deletion after its round would), the
    corrupt second log's task starts and fails the job: the first log is neither reported again nor
    cleaned again, and only the corrupt log runs again, alone."""
    pairs = twin_logs(tmp_path)
    broken = pairs[1][1].log
    corrupt_last_batch(broken)
    before = files(broken.directory)
    first_is_settled = threading.Event()

    def first_check() -> None:
        if first_is_settled.is_set():
            raise CleaningAbortedError("the first log was deleted after its round")

    jobs: list[float] = []
    engine = SparkEngine(
        clock=ManualClock(START_MS), session=spark_holder, on_job=jobs.append, poll_interval_s=0.01
    )
    with HeldTicket(broken) as held:

        def first_settled() -> None:
            first_is_settled.set()
            threading.Timer(0.3, held.release).start()  # the job's polls go on meanwhile

        results = clean_many(
            engine,
            [spark.log for _oracle, spark in pairs],
            [first_check, lambda: None, lambda: None],
            hooks={0: first_settled},
        )
    assert isinstance(results[0], CleaningResult), results[0]
    assert isinstance(results[1], Exception) and "CRC mismatch" in str(results[1])
    assert isinstance(results[2], CleaningResult), results[2]
    assert len(jobs) == 2, "the shared job, then the corrupt log alone"
    assert files(broken.directory) == before
    oracle = pairs[0][0]
    oracle_round(oracle.log, oracle.clock)
    assert files(pairs[0][1].log.directory) == files(oracle.log.directory)


# -- the workers ---------------------------------------------------------------------------------------


class SparkEnv:
    """A LogManager over one log dir, the cleaner built as the daemon builds it with the Spark engine forced
    (on the test session's SparkSession); ``actions`` hears every Spark job."""

    def __init__(self, log_dir: Path, spark_holder: SparkSessionHolder, **overrides: str) -> None:
        props = {
            "log.dirs": str(log_dir),
            "log.cleanup.policy": "compact",
            "log.segment.bytes": "1024",
            "log.cleaner.engine": "spark",
            **overrides,
        }
        self.log_dir = log_dir
        self.broker, _ = BrokerConfig.from_properties(props)
        self.tasks = DeferredTasks()
        self.clock = ManualClock(START_MS)
        self.manager, self.cleaning = build_compacted_log_manager(
            self.broker, TopicConfigStore([log_dir]), clock=self.clock, scheduler=self.tasks
        )
        self.manager.startup()
        self.jobs: list[float] = []
        spark = SparkEngine(clock=self.clock, session=spark_holder, on_job=self.jobs.append)
        self.engine = PerRoundEngine(EngineChoice.of(self.broker), InProcessEngine(self.clock), lambda: spark)

    def cleaner(self) -> LogCleaner:
        return build_log_cleaner(
            self.broker, self.manager, self.cleaning, self.engine, scheduler=self.tasks, threads=0
        )

    def checkpoints(self) -> dict[TopicPartition, int]:
        return OffsetCheckpointFile(self.log_dir / "cleaner-offset-checkpoint").read()

    def close(self) -> None:
        self.tasks.run_all()
        self.manager.shutdown()


def write_dirty(log: PartitionLog, rounds: int) -> None:
    """``rounds`` overwrites of 40 keys: the more rounds, the dirtier the log."""
    for r in range(rounds):
        for start in range(0, 40, 10):
            log.append_records(
                [Record(0, -1, b"k%d" % k, b"v%d-%d" % (r, k)) for k in range(start, start + 10)]
            )


def test_a_worker_takes_the_filthiest_logs_into_one_job_and_settles_each(
    tmp_path: Path, spark_holder: SparkSessionHolder
) -> None:
    env = SparkEnv(tmp_path / "logs", spark_holder, **{"log.cleaner.spark.max.logs.per.job": "2"})
    try:
        logs = env.manager.create_topic("t", 3)
        for log, rounds in zip(logs, (2, 6, 4), strict=True):
            write_dirty(log, rounds)
        by_ratio = sorted(logs, key=lambda log: -log_to_clean(log, None, START_MS).cleanable_ratio)
        first, second, third = by_ratio
        corrupt_last_batch(second, segment=0)  # the second filthiest fails; the filthiest shares its job
        cleaner = env.cleaner()
        outcomes = cleaner.clean_filthiest_logs()
        assert len(outcomes) == 2 and outcomes[1] is None
        assert outcomes[0] is not None and outcomes[0].engine == "spark"
        assert outcomes[0].partition == first.topic_partition.partition
        assert env.checkpoints() == {first.topic_partition: first.active_segment.base_offset}
        assert set(cleaner.manager.uncleanable()[env.log_dir]) == {second.topic_partition}
        assert cleaner.manager.in_progress == []
        later = cleaner.clean_filthiest_logs()  # the uncleanable log is skipped; the last one is taken alone
        assert [o.partition for o in later if o is not None] == [third.topic_partition.partition]
        assert cleaner.clean_filthiest_logs() == []
    finally:
        env.close()


def test_a_task_takes_again_only_what_its_partition_left_unreported(tmp_path: Path) -> None:
    """A task of a shared job run outside Spark, as a retried attempt of partition 0 finds the job: of the
    logs to take, one reported, one taken by partition 0 and not reported, one taken by partition 1, one
    settled (its ticket withdrawn). The task cleans only the second, then every group of its range of the
    log the tasks share (no other task has taken one), and leaves both reports. Partition 1 then finds
    every group of the shared log taken and reports none: with both ranges heard from, the driver settles
    the shared log from partition 0's rows."""
    logs = [spark.log for _oracle, spark in six_logs(tmp_path) + twin_logs(tmp_path / "c")]
    plans = [plan_round(log, 0, log.active_segment.base_offset, START_MS) for log in logs]
    rounds = [(log, plan) for log, plan in zip(logs, plans, strict=True) if plan is not None and plan.groups]
    tickets = [JobTicket.create(str(log.directory), plan.end_offset) for log, plan in rounds]
    outcomes: dict[int, object] = {}
    job = JobLogs([log for log, _ in rounds], [plan for _, plan in rounds], tickets, outcomes.__setitem__)
    plan_tasks(job, 2, DEFAULT_MIN_RANGE_BYTES)
    assert job.partitions == 2
    *to_take, shared, not_ours = job.items
    assert not shared.taken_path and (shared.range_index, not_ours.range_index) == (0, 1)
    reported, own, others, *settled = to_take
    assert settled, "a log for each case"
    write_report(reported.report_path, [])
    assert take(own.taken_path, own.report_path, 0) and take(others.taken_path, others.report_path, 1)
    for item in settled:
        tickets[item.log].close()
    rows = list(rewrite_partition(job.round_tasks, job.items)(0, []))
    assert len(rows) == len(own.slots) + len(shared.slots)
    assert {row["slot"] for row in rows} == set(own.slots) | set(shared.slots)
    assert Path(own.report_path).exists() and not Path(others.report_path).exists()
    assert Path(shared.report_path).exists() and not Path(not_ours.report_path).exists()
    late = list(rewrite_partition(job.round_tasks, job.items)(1, []))
    assert {row["slot"] for row in late} == set(others.slots), "no group of the shared log was left"
    reports = job.reports()
    assert reports is not None
    reports.wait(0, job.on_report)
    results, _map_size = cast(LogOutcome, outcomes[shared.log])
    assert [r.slot for r in results] == list(shared.slots)
    assert {r.task_partition for r in results} == {0}
    job.withdraw_tickets()


@pytest.mark.parametrize(
    ("sizes", "groups", "cores", "shared"),
    [
        ([5, 3, 4], [2, 2, 2], 2, 1),  # more logs than cores: the smallest, taken last otherwise
        ([5, 3, 3], [2, 2, 2], 2, 1),  # of equal ones, the first
        ([5, 3, 4], [2, 1, 2], 2, None),  # the smallest is one group: nothing to share
        ([5, 3], [2, 2], 2, None),  # a task a log: nothing is taken
        ([5, 3, 4], [2, 2, 2], 1, None),  # one core: one task takes them all
    ],
)
def test_the_shared_log_is_the_smallest_of_a_job_of_more_logs_than_cores(
    sizes: list[int], groups: list[int], cores: int, shared: int | None
) -> None:
    assert spark_jobs.shared_log(sizes, groups, cores) == shared


def test_a_round_that_shared_its_job_is_timed_from_its_own_first_task() -> None:
    """Logs cleaned in one job each report their own time, not the whole job's."""
    stats = CleanerStats(started_ms=START_MS, start_monotonic_ms=1_000)
    stats.end_monotonic_ms = 9_000  # the job and the swap: 8 s from the round's start

    def result(started_ms: int, lookup_ms: int) -> GroupResult:
        return GroupResult(0, 0, True, 1, CleanerStats(), 0, started_ms, started_ms + 100, lookup_ms, 0)

    time_from_own_tasks(stats, START_MS, [result(START_MS + 6_000, 500), result(START_MS + 7_000, 0)])
    assert stats.elapsed_ms == 2_500, "from its first task's lookup (at 5.5 s) to the end"
    time_from_own_tasks(stats, START_MS, [])
    assert stats.elapsed_ms == 2_500, "no task: nothing to move"

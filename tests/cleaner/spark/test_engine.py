"""The Spark engine's round around the job: aborts before a swap and during the job, a failing task, the
throttle/on_job/delayed-deletion hooks, and two workers cleaning at once in their own pools."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException

from cleaner.compaction.cleaner import CleaningResult, ScheduleDelete
from cleaner.compaction.offset_map import kafka_utilization_percent
from cleaner.engine import CompactionEngine, InProcessEngine
from cleaner.errors import CleaningAbortedError
from cleaner.spark import jobs
from cleaner.spark.engine import SparkEngine
from cleaner.spark.rewrite import GroupResult
from cleaner.spark.round_plan import plan_round
from cleaner.spark.session import SparkSessionHolder
from cleaner.spark.task_files import private_name, report_path, taken_path
from service.base.clock import ManualClock
from service.base.errors import CorruptDataError
from service.core.tasks import ManualTaskScheduler
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from tests.cleaner.helpers import compact_config
from tests.cleaner.spark.fixed_logs import mixed_ops
from tests.cleaner.spark.forced_ranges import force_ranges
from tests.cleaner.spark.random_logs import START_MS, Writer, build_twins, files

CONFIG = compact_config(segment_bytes=600)


def run_now(_delay_ms: int, task: Callable[[], None]) -> None:
    task()


def no_throttle(_bytes: int) -> None:
    return None


def clean_round(
    engine: CompactionEngine,
    log: PartitionLog,
    first_dirty_offset: int = 0,
    upper_bound_offset: int | None = None,
    *,
    check_aborted: Callable[[], None] = lambda: None,
    throttle: Callable[[int], None] = no_throttle,
    schedule_delete: ScheduleDelete = run_now,
    thread_id: int = 0,
) -> CleaningResult:
    """One round of ``engine`` on ``log``, by default from 0 up to the active segment, hooks idle."""
    upper = log.active_segment.base_offset if upper_bound_offset is None else upper_bound_offset
    return engine.clean(
        log,
        first_dirty_offset,
        upper,
        check_aborted=check_aborted,
        throttle=throttle,
        schedule_delete=schedule_delete,
        thread_id=thread_id,
    )


def twins(root: Path, config: LogConfig = CONFIG) -> tuple[Writer, Writer]:
    oracle, spark = build_twins(root, config, mixed_ops())
    assert files(oracle.log.directory) == files(spark.log.directory)
    return oracle, spark


def aborting_after(calls: int) -> Callable[[], None]:
    """A check_aborted that raises from its ``calls``-th call on."""
    count = 0

    def check() -> None:
        nonlocal count
        count += 1
        if count >= calls:
            raise CleaningAbortedError("aborted by the test")

    return check


def no_cleaned_files(directory: Path) -> bool:
    return not [p for p in directory.iterdir() if p.name.endswith(".cleaned")]


def test_an_abort_before_the_first_swap_leaves_the_log_as_it_was(
    tmp_path: Path, spark_holder: SparkSessionHolder
) -> None:
    _oracle, spark = twins(tmp_path)
    before = files(spark.log.directory)
    finished = threading.Event()
    engine = SparkEngine(clock=spark.clock, session=spark_holder, on_job=lambda _s: finished.set())

    def check_aborted() -> None:
        if finished.is_set():  # the job is done: the next check is the one before the first swap
            raise CleaningAbortedError("aborted by the test")

    with pytest.raises(CleaningAbortedError):
        clean_round(engine, spark.log, check_aborted=check_aborted)
    assert files(spark.log.directory) == before
    assert no_cleaned_files(spark.log.directory)


@pytest.mark.parametrize("range_bytes", [64 << 20, 1])  # one task; ranges, with a map job and files
def test_an_abort_during_the_job_cancels_it_and_a_later_round_still_matches_the_oracle(
    tmp_path: Path, spark_holder: SparkSessionHolder, range_bytes: int
) -> None:
    oracle, spark = twins(tmp_path)
    before = files(spark.log.directory)
    engine = SparkEngine(
        clock=spark.clock, session=spark_holder, poll_interval_s=0.01, min_range_bytes=range_bytes
    )
    upper = spark.log.active_segment.base_offset
    with pytest.raises(CleaningAbortedError):
        clean_round(engine, spark.log, 0, upper, check_aborted=aborting_after(3))
    assert files(spark.log.directory) == before
    assert no_cleaned_files(spark.log.directory)

    result = clean_round(engine, spark.log, 0, upper)
    expected = clean_round(InProcessEngine(oracle.clock), oracle.log, 0, upper)
    assert result.end_offset == expected.end_offset
    assert files(spark.log.directory) == files(oracle.log.directory)


@pytest.mark.parametrize("range_bytes", [64 << 20, 1])  # one task; ranges, with a map job and files
def test_a_corrupt_batch_fails_the_round_and_changes_nothing(
    tmp_path: Path, spark_holder: SparkSessionHolder, range_bytes: int
) -> None:
    _oracle, spark = twins(tmp_path)
    victim = spark.log.segments[2].log_path
    data = bytearray(victim.read_bytes())
    data[-3] ^= 0xFF  # inside the last batch's records: its CRC no longer matches
    victim.write_bytes(bytes(data))
    before = files(spark.log.directory)
    engine = SparkEngine(clock=spark.clock, session=spark_holder, min_range_bytes=range_bytes)
    with pytest.raises((PySparkException, CorruptDataError), match="CRC mismatch"):  # task, or driver
        clean_round(engine, spark.log)
    assert files(spark.log.directory) == before  # no .cleaned segment, map file or ticket left


def test_a_killed_tasks_half_written_files_are_removed_after_the_job(
    tmp_path: Path, spark_holder: SparkSessionHolder
) -> None:
    """A task killed between writing a private file and renaming it (its report, its claim) leaves it
    behind; the driver removes it once no task holds the round's ticket, not only at the next start."""
    oracle, spark = twins(tmp_path)
    directory, end = str(spark.log.directory), spark.log.active_segment.base_offset
    left = [
        Path(private_name(report_path(directory, end, 0))),
        Path(private_name(taken_path(directory, end))),
    ]
    for path in left:
        path.write_text("[")
    clean_round(SparkEngine(clock=spark.clock, session=spark_holder), spark.log)
    assert not [path for path in left if path.exists()]
    clean_round(InProcessEngine(oracle.clock), oracle.log)
    assert files(spark.log.directory) == files(oracle.log.directory)


def test_a_log_of_two_ranges_is_rewritten_by_two_tasks_that_take_its_groups(
    tmp_path: Path, spark_holder: SparkSessionHolder
) -> None:
    """About one rewrite task per core (``local[2]``: two, when no size floor applies, as with
    ``min_range_bytes=1``; the log's one key class is then mapped by one of them and its file read by
    both); the tasks take the groups one at a time (``task_files``), each group rewritten once, and
    leave no claims or map file behind."""
    oracle, spark = build_twins(tmp_path, CONFIG, mixed_ops(60))
    engine = SparkEngine(clock=spark.clock, session=spark_holder, min_range_bytes=1)
    seen: list[list[int]] = []
    rewrite = engine._rewrite

    def spy(*args: Any, **kwargs: Any) -> tuple[list[GroupResult], int]:
        results, map_size = rewrite(*args, **kwargs)
        seen.append([r.task_partition for r in results])
        return results, map_size

    engine._rewrite = spy  # type: ignore[method-assign]
    clean_round(engine, spark.log)
    partitions = seen[0]
    assert len(partitions) > 5 and set(partitions) <= {0, 1}
    clean_round(InProcessEngine(oracle.clock), oracle.log)
    assert files(spark.log.directory) == files(oracle.log.directory)


def test_a_log_of_more_ranges_than_twice_the_key_classes_matches_the_oracle(
    tmp_path: Path, spark_holder: SparkSessionHolder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster's many ranges make at most ``MAX_KEY_CLASSES`` classes (here capped at 2 for 6 ranges): the
    tasks past the classes map none, find every class file complete, and the round is the oracle's."""
    made = force_ranges(monkeypatch, 6, 2)
    items: list[int] = []
    plan = jobs.plan_tasks

    def plan_spy(job: Any, *args: Any) -> None:
        plan(job, *args)
        items.append(len(job.items))

    monkeypatch.setattr("cleaner.spark.engine.plan_tasks", plan_spy)
    oracle, spark = build_twins(tmp_path, CONFIG, mixed_ops(60))
    clean_round(SparkEngine(clock=spark.clock, session=spark_holder, min_range_bytes=1), spark.log)
    assert made == [2] and items == [6]
    clean_round(InProcessEngine(oracle.clock), oracle.log)
    assert files(spark.log.directory) == files(oracle.log.directory)


def test_hooks_hear_the_bytes_the_job_and_the_delayed_deletions(
    tmp_path: Path, spark_holder: SparkSessionHolder
) -> None:
    _oracle, spark = twins(tmp_path)
    throttled: list[int] = []
    jobs: list[float] = []
    scheduler = ManualTaskScheduler(ManualClock(START_MS))

    def schedule_delete(delay_ms: int, task: Callable[[], None]) -> None:
        assert delay_ms == CONFIG.file_delete_delay_ms
        scheduler.schedule_once("delete-file", delay_ms, task)

    engine = SparkEngine(
        clock=spark.clock, session=spark_holder, on_job=jobs.append, dedupe_buffer_bytes=1 << 20
    )
    result = clean_round(engine, spark.log, throttle=throttled.append, schedule_delete=schedule_delete)
    stats = result.stats
    assert len(jobs) == 1 and jobs[0] > 0
    assert throttled == [stats.map_bytes_read + stats.bytes_read + stats.bytes_written]
    assert stats.buffer_utilization == kafka_utilization_percent(stats.map_size, 1 << 20) / 100 > 0
    assert [p for p in spark.log.directory.iterdir() if p.name.endswith(".deleted")], "deletion waits"
    scheduler.advance(CONFIG.file_delete_delay_ms)
    assert not [p for p in spark.log.directory.iterdir() if p.name.endswith(".deleted")]


def test_a_round_with_nothing_to_clean_runs_no_job(tmp_path: Path, spark_holder: SparkSessionHolder) -> None:
    _oracle, spark = twins(tmp_path)
    jobs: list[float] = []
    engine = SparkEngine(clock=spark.clock, session=spark_holder, on_job=jobs.append)
    result = clean_round(engine, spark.log, 10, 0)
    assert result.end_offset == 10 and jobs == []


def test_two_workers_clean_two_logs_at_once(tmp_path: Path, spark_holder: SparkSessionHolder) -> None:
    pairs = [twins(tmp_path / "a"), twins(tmp_path / "b", compact_config(segment_bytes=1024))]
    engine = SparkEngine(clock=ManualClock(START_MS), session=spark_holder)
    errors: list[BaseException] = []

    def worker(thread_id: int) -> None:
        spark = pairs[thread_id][1]
        try:
            clean_round(engine, spark.log, thread_id=thread_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for oracle, spark in pairs:
        clean_round(InProcessEngine(ManualClock(START_MS)), oracle.log)
        assert files(spark.log.directory) == files(oracle.log.directory)


@pytest.mark.parametrize("min_range_bytes", [64 << 20, 200])
def test_ranges_and_aborted_batches_match_the_oracle(
    tmp_path: Path, spark_holder: SparkSessionHolder, min_range_bytes: int
) -> None:
    """One range, mapped by its own task, or several, mapped by key hash, over a log whose dirty section
    holds aborted data."""
    oracle, spark = twins(tmp_path)
    upper = spark.log.active_segment.base_offset
    plan = plan_round(spark.log, 0, upper, spark.clock.now_ms())
    assert plan is not None and plan.map_scan.aborted_batches
    engine = SparkEngine(clock=spark.clock, session=spark_holder, min_range_bytes=min_range_bytes)
    result = clean_round(engine, spark.log, 0, upper)
    expected = clean_round(InProcessEngine(oracle.clock), oracle.log, 0, upper)
    assert (result.end_offset, result.stats.map_size) == (expected.end_offset, expected.stats.map_size)
    assert files(spark.log.directory) == files(oracle.log.directory)

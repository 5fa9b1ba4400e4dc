"""The Spark engine's key map bounded by the thread's share of the dedupe buffer (``partial_maps``): a round
over more keys than the share holds is mapped by one task that spills, every rewrite task answers from its
bitmap alone, and the log comes out byte for byte as the in-process engine writes it (unbounded)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from cleaner.compaction.cleaner import CleaningResult
from cleaner.compaction.key_map_budget import KeyMapBudget
from cleaner.compaction.offset_map import OffsetMap, build_offset_map
from cleaner.compaction.stats import CleanerStats
from cleaner.engine import CompactionEngine, InProcessEngine, LogRound
from cleaner.native import has_native, native_key_map
from cleaner.spark.engine import SparkEngine
from cleaner.spark.jobs import JobLogs, plan_tasks
from cleaner.spark.partial_maps import range_lookup, write_partial_map
from cleaner.spark.round_plan import plan_round
from cleaner.spark.session import SparkSessionHolder
from cleaner.spark.task_files import JobTicket
from service.base.clock import ManualClock
from service.config.broker_config import BrokerConfig
from service.shell.node import build_engine
from service.storage.loader import load_partition_log
from tests.cleaner.bounded_round_process import NOW_MS
from tests.cleaner.budget_logs import (
    TINY_SHARE,
    budget_config,
    plain_log,
    transactional_log,
)

pytestmark = pytest.mark.skipif(not has_native(), reason="the bound is the C key map's")

ONE_TASK, TWO_TASKS = 64 << 20, 1  # min_range_bytes: one range (its task maps), or a range a core (a file)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plain_log(tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def transactional(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return transactional_log(tmp_path_factory.mktemp("txn"))


def _clean(engine: CompactionEngine, source: Path, target: Path, first_dirty: int) -> CleaningResult:
    shutil.copytree(source, target)
    log = load_partition_log(target, budget_config(), clock=ManualClock(NOW_MS)).log

    def delete_now(_delay_ms: int, delete: Callable[[], None]) -> None:
        delete()

    try:
        return engine.clean(
            log,
            first_dirty,
            log.active_segment.base_offset,
            check_aborted=lambda: None,
            throttle=lambda _bytes: None,
            schedule_delete=delete_now,
        )
    finally:
        log.close()


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _assert_bounded_round(
    source: Path,
    tmp_path: Path,
    spark_holder: SparkSessionHolder,
    caplog: pytest.LogCaptureFixture,
    *,
    first_dirty: int,
    range_bytes: int,
    budget: KeyMapBudget,
) -> None:
    expected = _clean(
        InProcessEngine(ManualClock(NOW_MS)), source, tmp_path / "in-process" / "gen-0", first_dirty
    )
    assert expected.stats.spill_classes == 0
    engine = SparkEngine(
        clock=ManualClock(NOW_MS), session=spark_holder, min_range_bytes=range_bytes, key_map_budget=budget
    )
    with caplog.at_level(logging.INFO, logger="cleaner.spark.engine"):
        result = _clean(engine, source, tmp_path / "spark" / "gen-0", first_dirty)
    assert result.stats.spill_classes > 0 and "spilled to" in caplog.text  # the bound was applied
    assert result.end_offset == expected.end_offset
    assert result.stats.map_size == expected.stats.map_size  # every key, counted across the classes
    assert _files(tmp_path / "spark" / "gen-0") == _files(
        tmp_path / "in-process" / "gen-0"
    )  # no scratch or spill file left


@pytest.mark.parametrize("range_bytes", [ONE_TASK, TWO_TASKS])
@pytest.mark.parametrize("first_dirty", [0, 25_000])
def test_a_spilled_spark_round_writes_the_in_process_bytes(
    plain: Path,
    tmp_path: Path,
    spark_holder: SparkSessionHolder,
    caplog: pytest.LogCaptureFixture,
    first_dirty: int,
    range_bytes: int,
) -> None:
    """From offset 0 (every record dirty) and from the middle (the clean section probed by the map task);
    one task mapping its own range, or two tasks reading the bitmap one of them wrote."""
    _assert_bounded_round(
        plain,
        tmp_path,
        spark_holder,
        caplog,
        first_dirty=first_dirty,
        range_bytes=range_bytes,
        budget=KeyMapBudget(TINY_SHARE),
    )


def test_a_spilled_spark_round_over_transactions_and_lz4_writes_the_same_bytes(
    transactional: Path, tmp_path: Path, spark_holder: SparkSessionHolder, caplog: pytest.LogCaptureFixture
) -> None:
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    _assert_bounded_round(
        transactional,
        tmp_path,
        spark_holder,
        caplog,
        first_dirty=17_000,
        range_bytes=TWO_TASKS,
        budget=KeyMapBudget(TINY_SHARE, spill_dir),
    )
    assert list(spill_dir.iterdir()) == []


def test_a_share_the_round_fits_in_maps_by_key_class_as_before(
    plain: Path, tmp_path: Path, spark_holder: SparkSessionHolder
) -> None:
    engine = SparkEngine(
        clock=ManualClock(NOW_MS),
        session=spark_holder,
        min_range_bytes=TWO_TASKS,
        key_map_budget=KeyMapBudget(256 << 20),
    )
    result = _clean(engine, plain, tmp_path / "spark" / "gen-0", 0)
    expected = _clean(InProcessEngine(ManualClock(NOW_MS)), plain, tmp_path / "in-process" / "gen-0", 0)
    assert result.stats.spill_classes == 0 and result.end_offset == expected.end_offset
    assert _files(tmp_path / "spark" / "gen-0") == _files(tmp_path / "in-process" / "gen-0")


def test_a_rewrite_tasks_lookup_answers_from_the_spilled_bitmap_alone(plain: Path, tmp_path: Path) -> None:
    """The bounded map's file (written as its task writes it) gives a lookup holding no key, whose every
    answer, for each keyed record of the log, clean section included, is the unbounded map's."""
    directory = tmp_path / "log" / "gen-0"
    shutil.copytree(plain, directory)
    log = load_partition_log(directory, budget_config(), clock=ManualClock(NOW_MS)).log
    first_dirty, end = 25_000, log.active_segment.base_offset
    plan = plan_round(log, first_dirty, end, NOW_MS)
    assert plan is not None
    ticket = JobTicket.create(str(directory), plan.end_offset)
    try:
        job = JobLogs([log], [plan], [ticket], None)
        plan_tasks(job, 2, TWO_TASKS, KeyMapBudget(TINY_SHARE))
        (task,) = job.items[0].class_maps  # one map of every key, bounded
        write_partial_map(task, ticket.ref)
        found = range_lookup(None, [task.blob_path])
    finally:
        ticket.close()
        job.delete_scratch_files()
    expected = OffsetMap()
    build_offset_map(log.segments, first_dirty, end, expected, CleanerStats())
    key_map = native_key_map(found.lookup)
    assert key_map is not None and found.spill_classes > 0 and found.keys == expected.size
    answers = 0
    for segment in log.segments[:-1]:
        for batch in segment.batches(0):
            for record in batch.records():
                if record.key is not None:
                    is_superseded = record.offset < expected.get(record.key)
                    assert key_map.superseded(record.key, record.offset) == is_superseded, record.offset
                    answers += is_superseded
    assert answers > 20_000  # most of the log is superseded: the bits were there to read
    log.close()


def test_a_map_that_cannot_spill_is_built_again_unbounded_and_the_round_still_comes_out_whole(
    plain: Path, tmp_path: Path, spark_holder: SparkSessionHolder
) -> None:
    """A spill dir that cannot take the class files (gone since start-up): the task's map is built again
    in memory, with a warning in its worker's log, and the round is the in-process engine's all the same."""
    budget = KeyMapBudget(TINY_SHARE, tmp_path / "gone")
    engine = SparkEngine(
        clock=ManualClock(NOW_MS), session=spark_holder, min_range_bytes=TWO_TASKS, key_map_budget=budget
    )
    result = _clean(engine, plain, tmp_path / "spark" / "gen-0", 25_000)
    expected = _clean(InProcessEngine(ManualClock(NOW_MS)), plain, tmp_path / "in-process" / "gen-0", 25_000)
    assert result.stats.spill_classes == 0 and result.end_offset == expected.end_offset
    assert _files(tmp_path / "spark" / "gen-0") == _files(tmp_path / "in-process" / "gen-0")


def test_the_daemons_spark_engine_takes_each_threads_share_and_the_spill_dir(tmp_path: Path) -> None:
    """``build_engine`` hands the Spark engine the in-process engine's budget (no session is started)."""
    (tmp_path / "spill").mkdir()
    props = {
        "log.dirs": str(tmp_path / "logs"),
        "log.cleaner.threads": "2",
        "log.cleaner.dedupe.buffer.size": str(128 << 20),
        "log.cleaner.spill.dir": str(tmp_path / "spill"),
        "log.cleaner.engine": "spark",
    }
    broker, _warnings = BrokerConfig.from_properties(props)
    engine = build_engine(broker, ManualClock(NOW_MS))
    spark = engine._build_spark()  # what the first round that goes to Spark builds
    try:
        assert isinstance(spark, SparkEngine) and not spark.session.is_started
        assert spark.key_map_budget == KeyMapBudget(64 << 20, tmp_path / "spill")
    finally:
        spark.close()


def test_logs_sharing_one_job_are_each_bounded_and_each_the_in_process_bytes(
    plain: Path, tmp_path: Path, spark_holder: SparkSessionHolder
) -> None:
    """Three logs, one job on two cores: tasks take two logs whole (each mapped by its own task, bounded)
    and all clean the third together (one bounded map's bitmap file); each log is its in-process round."""
    expected = _clean(InProcessEngine(ManualClock(NOW_MS)), plain, tmp_path / "in-process" / "gen-0", 25_000)
    logs = []
    for i in range(3):
        shutil.copytree(plain, tmp_path / "spark" / f"gen-{i}")
        logs.append(
            load_partition_log(
                tmp_path / "spark" / f"gen-{i}", budget_config(), clock=ManualClock(NOW_MS)
            ).log
        )
    ended: dict[int, CleaningResult | BaseException] = {}

    def on_done(i: int) -> Callable[[CleaningResult | BaseException], None]:
        def record(outcome: CleaningResult | BaseException) -> None:
            assert i not in ended, "on_done is called once per log"
            ended[i] = outcome

        return record

    def delete_now(_delay_ms: int, delete: Callable[[], None]) -> None:
        delete()

    engine = SparkEngine(
        clock=ManualClock(NOW_MS), session=spark_holder, key_map_budget=KeyMapBudget(TINY_SHARE)
    )
    try:
        rounds = [
            LogRound(log, 25_000, log.active_segment.base_offset, lambda: None, on_done(i))
            for i, log in enumerate(logs)
        ]
        engine.clean_many(rounds, throttle=lambda _bytes: None, schedule_delete=delete_now)
    finally:
        for log in logs:
            log.close()
    for i in range(3):
        result = ended[i]
        assert isinstance(result, CleaningResult), result
        assert result.stats.spill_classes > 0 and result.end_offset == expected.end_offset
        assert _files(tmp_path / "spark" / f"gen-{i}") == _files(tmp_path / "in-process" / "gen-0")

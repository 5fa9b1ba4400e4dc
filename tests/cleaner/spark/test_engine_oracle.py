"""The Spark engine against the oracle (the in-process ``Cleaner``): for random logs and rounds, every file of
the partition dir is byte-identical afterwards, and so are the end offset and the round's counters."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleaner.compaction.cleaner import CleaningResult
from cleaner.engine import InProcessEngine
from cleaner.native import puts_pipelined
from cleaner.spark import jobs
from cleaner.spark.engine import SparkEngine
from cleaner.spark.session import SparkSessionHolder
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from tests.cleaner.helpers import DAY_MS
from tests.cleaner.spark.fixed_logs import mixed_ops
from tests.cleaner.spark.forced_ranges import force_ranges
from tests.cleaner.spark.random_logs import Op, Writer, build_twins, configs, files, operations

COUNTERS = (
    "bytes_read",
    "bytes_written",
    "bytes_skipped",
    "records_read",
    "records_retained",
    "invalid_records",
    "map_bytes_read",
    "map_records_read",
    "map_size",
    "groups_rewritten",
    "groups_skipped",
    "segments_read",
    "buffer_utilization",
)


def run_now(_delay_ms: int, task: Callable[[], None]) -> None:
    task()


def pick_upper(log: PartitionLog, pick: int) -> int:
    """0: the active segment; 1: the log end; 2: a middle segment's base; 3: offset 0 (capped at the LSO)."""
    segments = log.segments
    choices = [
        log.active_segment.base_offset,
        log.log_end_offset,
        segments[len(segments) // 2].base_offset,
        0,
    ]
    return min(choices[pick], log.last_stable_offset)


def clean_both(
    oracle: Writer, spark: Writer, engine: SparkEngine, first_dirty: int, upper: int
) -> tuple[CleaningResult, CleaningResult]:
    expected = InProcessEngine(oracle.clock).clean(
        oracle.log,
        first_dirty,
        upper,
        check_aborted=lambda: None,
        throttle=lambda _n: None,
        schedule_delete=run_now,
    )
    actual = engine.clean(
        spark.log,
        first_dirty,
        upper,
        check_aborted=lambda: None,
        throttle=lambda _n: None,
        schedule_delete=run_now,
    )
    return expected, actual


rounds = st.lists(
    st.tuples(
        st.lists(st.sampled_from([Op("roll")]), max_size=1) | operations,
        st.integers(0, 3),
        st.sampled_from([0, 1_000, DAY_MS + 1]),
    ),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(
    config=configs,
    ops=operations,
    rounds=rounds,
    range_bytes=st.sampled_from([200, 64 << 20]),
    first_dirty_share=st.sampled_from([0.0, 0.0, 0.5]),
)
def test_spark_rounds_equal_the_oracle_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory,
    spark_holder: SparkSessionHolder,
    config: LogConfig,
    ops: list[Op],
    rounds: list[tuple[list[Op], int, int]],
    range_bytes: int,
    first_dirty_share: float,
) -> None:
    check_rounds(tmp_path_factory, spark_holder, config, ops, rounds, range_bytes, first_dirty_share)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(config=configs, ops=operations, rounds=rounds, first_dirty_share=st.sampled_from([0.0, 0.5]))
@pytest.mark.parametrize(("ranges", "max_classes"), [(3, 4), (6, 4), (6, 2)])
def test_a_log_cut_into_many_ranges_equals_the_oracle(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
    spark_holder: SparkSessionHolder,
    ranges: int,
    max_classes: int,
    config: LogConfig,
    ops: list[Op],
    rounds: list[tuple[list[Op], int, int]],
    first_dirty_share: float,
) -> None:
    """More ranges than local[2]'s cores: the log is mapped by key hash in 2 or 3 classes (one per two ranges,
    ``key_classes``), and each rewrite task ORs their bitmaps and puts their deferred blobs when a lookup
    needs them. With the classes capped at 2, 6 ranges' tasks 2-5 find the classes mapped by others."""
    classes_used = force_ranges(monkeypatch, ranges, max_classes)
    # a fixed start of full segments: the random logs alone mostly make one group, so one range (the map by
    # key hash ran in 1 of 36 examples before it)
    check_rounds(tmp_path_factory, spark_holder, config, mixed_ops(20) + ops, rounds, 200, first_dirty_share)
    assert all(1 <= used <= max_classes for used in classes_used)


@pytest.mark.parametrize("ranges", [1, 2, 3, 8, 9, 64, 1000])
def test_key_classes_are_one_per_two_ranges_at_most_max_key_classes(ranges: int) -> None:
    """A class's map takes two cores (its puts on their own thread), and past MAX_KEY_CLASSES more classes
    would only read the log again: a cluster's 64 ranges make 4 classes, not 32."""
    per_class = 2 if puts_pipelined() else 1
    assert jobs.key_classes(ranges) == min(-(-ranges // per_class), jobs.MAX_KEY_CLASSES)
    assert jobs.MAX_KEY_CLASSES == 4


def check_rounds(
    tmp_path_factory: pytest.TempPathFactory,
    spark_holder: SparkSessionHolder,
    config: LogConfig,
    ops: list[Op],
    rounds: list[tuple[list[Op], int, int]],
    range_bytes: int,
    first_dirty_share: float,
) -> None:
    root = tmp_path_factory.mktemp("twins")
    oracle, spark = build_twins(root, config, ops)
    engine = SparkEngine(clock=spark.clock, session=spark_holder, min_range_bytes=range_bytes)
    first_dirty = int(oracle.log.log_end_offset * first_dirty_share)
    for more_ops, upper_pick, delta_ms in rounds:
        for writer in (oracle, spark):
            writer.apply(more_ops)
            writer.clock.advance(delta_ms)
        assert files(oracle.log.directory) == files(spark.log.directory)
        upper = pick_upper(oracle.log, upper_pick)
        expected, actual = clean_both(oracle, spark, engine, first_dirty, upper)
        assert actual.end_offset == expected.end_offset
        assert files(spark.log.directory) == files(oracle.log.directory)
        assert {c: getattr(actual.stats, c) for c in COUNTERS} == {
            c: getattr(expected.stats, c) for c in COUNTERS
        }
        first_dirty = expected.end_offset
    oracle.log.close()
    spark.log.close()
    assert files(spark.log.directory) == files(oracle.log.directory), "and after a clean close"

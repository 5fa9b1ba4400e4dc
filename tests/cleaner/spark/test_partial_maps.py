"""The Spark engine's map tasks without Spark: partial maps of splits, merged in split order, equal the key
map the in-process round builds (``build_offset_map``), in C and in pure Python; the blob form is the same
both ways."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cleaner.native
from cleaner.offset_map import OffsetMap, build_offset_map
from cleaner.spark import partial_maps
from cleaner.spark.job_ticket import JobTicket
from cleaner.spark.partial_maps import (
    blob_path,
    build_partial_map,
    map_tasks,
    merged_lookup,
    range_lookup,
    write_partial_map,
)
from cleaner.spark.round_plan import plan_round
from cleaner.spark.segment_splits import plan_splits
from cleaner.stats import CleanerStats
from service.clock import ManualClock
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig
from tests.cleaner.spark.random_logs import KEYS, START_MS, Op, Writer, configs, operations


def partial_then_merged(
    writer: Writer, first_dirty: int, split_bytes: int, task_bytes: int
) -> tuple[dict[bytes, int], int]:
    log = writer.log
    plan = plan_round(log, first_dirty, log.active_segment.base_offset, writer.clock.now_ms())
    assert plan is not None
    blobs = []
    if plan.has_dirty_segments:
        splits = plan_splits(
            log.directory, from_offset=first_dirty, until_offset=plan.end_offset, max_split_bytes=split_bytes
        )
        tasks = map_tasks(0, splits, first_dirty, plan.map_scan.aborted_batches, task_bytes)
        blobs = [build_partial_map(task) for task in tasks]
    lookup, size = merged_lookup(blobs)
    return {key: lookup(key) for key in KEYS}, size


def files_then_loaded(
    writer: Writer, first_dirty: int, split_bytes: int, own_first: bool
) -> tuple[dict[bytes, int], int]:
    """Each split a range: its map written to a file (``write_partial_map``), then every file loaded in
    order by ``range_lookup`` (with ``own_first``, the first range mapped in place instead)."""
    log = writer.log
    plan = plan_round(log, first_dirty, log.active_segment.base_offset, writer.clock.now_ms())
    assert plan is not None
    tasks = []
    if plan.has_dirty_segments:
        splits = plan_splits(
            log.directory, from_offset=first_dirty, until_offset=plan.end_offset, max_split_bytes=split_bytes
        )
        tasks = map_tasks(0, splits, first_dirty, plan.map_scan.aborted_batches, 1)
    ticket = JobTicket.create(str(log.directory), plan.end_offset)
    paths = []
    for task in tasks:
        path = blob_path(str(log.directory), plan.end_offset, task.index)
        write_partial_map(replace(task, blob_path=path, ticket=ticket.path))
        paths.append(path)
    own = tasks[0] if own_first and tasks else None
    lookup, size = range_lookup(own, paths[1:] if own is not None else paths)
    ticket.close()
    for path in paths:
        Path(path).unlink()
    return {key: lookup(key) for key in KEYS}, size


def in_process_map(writer: Writer, first_dirty: int) -> tuple[dict[bytes, int], int]:
    log = writer.log
    upper = log.active_segment.base_offset
    offset_map = OffsetMap()
    build_offset_map(log.segments, first_dirty, upper, offset_map, CleanerStats())
    return {key: offset_map.get(key) for key in KEYS}, offset_map.size


def written_log(root: Path, config: LogConfig, ops: list[Op]) -> Writer:
    root.mkdir(parents=True)
    clock = ManualClock(START_MS)
    writer = Writer(load_partition_log(root, config, clock=clock).log, clock)
    writer.apply(ops)
    writer.close_transactions()
    writer.log.roll()
    return writer


@pytest.mark.parametrize("pure_python", [False, True])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    config=configs,
    ops=operations,
    dirty_fraction=st.floats(0, 1),
    split_bytes=st.sampled_from([1, 200, 1 << 20]),
    task_bytes=st.sampled_from([1, 500, 1 << 20]),
)
def test_merged_partial_maps_equal_the_in_process_map(
    monkeypatch: pytest.MonkeyPatch,
    pure_python: bool,
    config: LogConfig,
    ops: list[Op],
    dirty_fraction: float,
    split_bytes: int,
    task_bytes: int,
) -> None:
    if pure_python:
        monkeypatch.setattr(cleaner.native, "_native", None)
    with tempfile.TemporaryDirectory() as tmp:
        writer = written_log(Path(tmp) / "t-0", config, ops)
        first_dirty = int(writer.log.active_segment.base_offset * dirty_fraction)
        assert partial_then_merged(writer, first_dirty, split_bytes, task_bytes) == in_process_map(
            writer, first_dirty
        )
        writer.log.close()


@pytest.mark.parametrize("pure_python", [False, True])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    config=configs,
    ops=operations,
    dirty_fraction=st.floats(0, 1),
    split_bytes=st.sampled_from([1, 300, 1 << 20]),
    own_first=st.booleans(),
)
def test_map_files_loaded_in_order_equal_the_in_process_map(
    monkeypatch: pytest.MonkeyPatch,
    pure_python: bool,
    config: LogConfig,
    ops: list[Op],
    dirty_fraction: float,
    split_bytes: int,
    own_first: bool,
) -> None:
    if pure_python:
        monkeypatch.setattr(cleaner.native, "_native", None)
    with tempfile.TemporaryDirectory() as tmp:
        writer = written_log(Path(tmp) / "t-0", config, ops)
        first_dirty = int(writer.log.active_segment.base_offset * dirty_fraction)
        assert files_then_loaded(writer, first_dirty, split_bytes, own_first) == in_process_map(
            writer, first_dirty
        )
        writer.log.close()


def test_the_blob_form_is_the_same_in_c_and_in_python() -> None:
    native = cleaner.native._native
    assert native is not None
    entries = {b"k%d" % i + b"x" * (i % 30): i * 7 - 3 for i in range(2_000)}
    entries[b""] = 5
    key_map = native.KeyMap()
    for key, offset in entries.items():
        key_map.put(key, offset)
    blob = cleaner.native.dump_key_map(key_map)
    assert partial_maps._entries_of(blob) == entries
    python_map = OffsetMap(native=False)
    for key, offset in entries.items():
        python_map.put(key, offset)
    lookup, size = merged_lookup(
        [partial_maps._dump_entries(python_map), cleaner.native.dump_key_map(native.KeyMap())]
    )
    assert size == len(entries) and all(lookup(key) == offset for key, offset in entries.items())


def test_a_later_blob_wins_and_a_cut_blob_is_refused() -> None:
    first, second = OffsetMap(), OffsetMap()
    first.put(b"a", 1)
    first.put(b"b", 2)
    second.put(b"a", 9)
    native_first, native_second = first.native, second.native
    assert native_first is not None and native_second is not None
    blobs = [cleaner.native.dump_key_map(native_first), cleaner.native.dump_key_map(native_second)]
    lookup, size = merged_lookup(blobs)
    assert (lookup(b"a"), lookup(b"b"), lookup(b"c"), size) == (9, 2, -1, 2)
    with pytest.raises(ValueError, match="runs past its end"):
        merged_lookup([blobs[0][:-1]])

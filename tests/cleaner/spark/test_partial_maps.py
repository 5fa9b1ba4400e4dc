"""The Spark engine's map tasks without Spark: a log's own map, and the maps by key hash, written to files
and loaded by a rewrite task, equal the key map the in-process round builds (``build_offset_map``), in C
and in pure Python; the key classes' bitmaps OR'd equal the bitmap of one map
of every key; the blob form is the same both ways."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cleaner.native
from cleaner.compaction.offset_map import OffsetMap, build_offset_map
from cleaner.compaction.segment_chunks import SegmentChunks
from cleaner.compaction.stats import CleanerStats
from cleaner.spark import partial_maps, round_plan
from cleaner.spark.partial_maps import (
    MapSplit,
    blob_path,
    class_tasks,
    ensure_class_files,
    range_lookup,
    write_partial_map,
)
from cleaner.spark.round_plan import MapScan, plan_round
from cleaner.spark.segment_splits import plan_splits
from cleaner.spark.task_files import JobTicket, TaskTicket
from service.base.clock import ManualClock, SystemClock
from service.shell.tools.gen import GenOptions, generate
from service.storage.compression import CompressionType
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import RecordBatch
from tests.cleaner.helpers import compact_config
from tests.cleaner.spark.random_logs import KEYS, START_MS, TXN_PRODUCERS, Op, Writer, configs, operations


def class_maps(writer: Writer, first_dirty: int, split_bytes: int, classes: int) -> list[MapSplit]:
    """The map tasks of the log's round by key hash (``classes`` of them; none without dirty segments)."""
    log = writer.log
    plan = plan_round(log, first_dirty, log.active_segment.base_offset, writer.clock.now_ms())
    assert plan is not None
    if not plan.has_dirty_segments:
        return []
    splits = plan_splits(
        log.directory, from_offset=first_dirty, until_offset=plan.end_offset, max_split_bytes=split_bytes
    )
    return class_tasks(0, splits, first_dirty, plan.map_scan.aborted_batches, classes)


def files_then_loaded(
    writer: Writer, first_dirty: int, split_bytes: int, classes: int
) -> tuple[dict[bytes, int], int]:
    """The map by key hash: each class's map written to a file (``write_partial_map``), then every file
    loaded by ``range_lookup`` (bits OR'd, blobs deferred until a lookup needs them)."""
    log = writer.log
    end = log.active_segment.base_offset
    ticket = JobTicket.create(str(log.directory), end)
    paths = []
    for task in class_maps(writer, first_dirty, split_bytes, classes):
        path = blob_path(str(log.directory), end, task.key_class)
        write_partial_map(replace(task, blob_path=path), ticket.ref)
        paths.append(path)
    lookup, size, _spilled = range_lookup(None, paths)
    ticket.close()
    for path in paths:
        Path(path).unlink()
    return {key: lookup(key) for key in KEYS}, size


def mapped_in_place(writer: Writer, first_dirty: int, split_bytes: int) -> tuple[dict[bytes, int], int]:
    """A log of one range: its task maps the dirty section itself (``range_lookup`` with ``own``)."""
    tasks = class_maps(writer, first_dirty, split_bytes, 1)
    lookup, size, _spilled = range_lookup(replace(tasks[0], classes=1) if tasks else None, [])
    return {key: lookup(key) for key in KEYS}, size


def in_process_map(writer: Writer, first_dirty: int) -> tuple[dict[bytes, int], int]:
    offset_map = in_process_offset_map(writer.log, first_dirty)
    return {key: offset_map.get(key) for key in KEYS}, offset_map.size


def in_process_offset_map(log: PartitionLog, first_dirty: int) -> OffsetMap:
    offset_map = OffsetMap()
    build_offset_map(log.segments, first_dirty, log.active_segment.base_offset, offset_map, CleanerStats())
    return offset_map


def ored_class_bits(tasks: list[MapSplit]) -> bytes | None:
    """Each class task's map built, its bitmap OR'd into one C map as a rewrite task does (an empty class
    adds nothing); that map's bitmap."""
    merged = cleaner.native.new_native_key_map()
    assert merged is not None
    for task in tasks:
        class_map = partial_maps._task_map(task)
        partial_maps._map_into(task, class_map, spare_core=True)  # as a class map task does
        assert class_map.native is not None
        if class_map.size:
            cleaner.native.or_superseded_bits(merged, cleaner.native.dump_superseded_bits(class_map.native))
    return cleaner.native.dump_superseded_bits(merged)


def written_log(root: Path, config: LogConfig, ops: list[Op]) -> Writer:
    root.mkdir(parents=True)
    clock = ManualClock(START_MS)
    writer = Writer(load_partition_log(root, config, clock=clock).log, clock)
    writer.apply(ops)
    writer.close_transactions()
    writer.log.roll()
    return writer


@contextmanager
def random_log(config: LogConfig, ops: list[Op], dirty_fraction: float) -> Iterator[tuple[Writer, int]]:
    """``ops`` written to a fresh log in a temporary dir, with its first dirty offset (that fraction of the
    log); the log is closed after."""
    with tempfile.TemporaryDirectory() as tmp:
        writer = written_log(Path(tmp) / "t-0", config, ops)
        yield writer, int(writer.log.active_segment.base_offset * dirty_fraction)
        writer.log.close()


@pytest.mark.parametrize("pure_python", [False, True])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    config=configs,
    ops=operations,
    dirty_fraction=st.floats(0, 1),
    split_bytes=st.sampled_from([1, 300, 1 << 20]),
    classes=st.sampled_from([1, 2, 3, 5]),
)
def test_maps_by_key_hash_loaded_from_files_equal_the_in_process_map(
    monkeypatch: pytest.MonkeyPatch,
    pure_python: bool,
    config: LogConfig,
    ops: list[Op],
    dirty_fraction: float,
    split_bytes: int,
    classes: int,
) -> None:
    if pure_python:
        monkeypatch.setattr(cleaner.native, "_native", None)
    with random_log(config, ops, dirty_fraction) as (writer, first_dirty):
        expected = in_process_map(writer, first_dirty)
        assert files_then_loaded(writer, first_dirty, split_bytes, classes) == expected
        assert mapped_in_place(writer, first_dirty, split_bytes) == expected


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
    loaded = native.KeyMap()
    cleaner.native.load_key_map(loaded, partial_maps._dump_entries(python_map))
    assert len(loaded) == len(entries) and all(loaded.get(key) == offset for key, offset in entries.items())


def test_a_later_blob_wins_and_a_cut_blob_is_refused() -> None:
    first, second = OffsetMap(), OffsetMap()
    first.put(b"a", 1)
    first.put(b"b", 2)
    second.put(b"a", 9)
    native_first, native_second = first.native, second.native
    assert native_first is not None and native_second is not None
    blobs = [cleaner.native.dump_key_map(native_first), cleaner.native.dump_key_map(native_second)]
    merged = OffsetMap()
    assert merged.native is not None
    for blob in blobs:
        cleaner.native.defer_key_map(merged.native, blob)
    assert (merged.get(b"a"), merged.get(b"b"), merged.get(b"c"), merged.size) == (9, 2, -1, 2)
    with pytest.raises(ValueError, match="runs past its end"):
        cleaner.native.defer_key_map(native_first, blobs[0][:-1])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    config=configs,
    ops=operations,
    dirty_fraction=st.floats(0, 1),
    classes=st.sampled_from([2, 3, 5]),
)
def test_the_key_classes_bitmaps_ored_equal_the_bitmap_of_one_map(
    config: LogConfig, ops: list[Op], dirty_fraction: float, classes: int
) -> None:
    with random_log(config, ops, dirty_fraction) as (writer, first_dirty):
        whole = in_process_offset_map(writer.log, first_dirty).native
        assert whole is not None
        tasks = class_maps(writer, first_dirty, 1 << 20, classes)
        assert ored_class_bits(tasks) == cleaner.native.dump_superseded_bits(whole)


@pytest.fixture(scope="module")
def many_keys(tmp_path_factory: pytest.TempPathFactory) -> PartitionLog:
    """A log of 40,000 records over 3,000 keys, 5% tombstones, in 256 KiB segments, all but one cleanable."""
    root = tmp_path_factory.mktemp("many-keys")
    generate(
        GenOptions(
            log_dir=root,
            records=40_000,
            keys=3_000,
            tombstones=0.05,
            segment_bytes=256 << 10,
            cleanup_policy=frozenset({"compact"}),
        )
    )
    config = LogConfig(segment_bytes=256 << 10, cleanup_policy=frozenset({"compact"}))
    log = load_partition_log(root / "gen-0-0", config, clock=SystemClock()).log
    log.roll()
    return log


@pytest.mark.parametrize("first_dirty", [0, 17_000])
@pytest.mark.parametrize("classes", [2, 3, 8])
def test_many_keys_by_key_hash_give_the_bits_and_the_lookups_of_one_map(
    many_keys: PartitionLog, first_dirty: int, classes: int
) -> None:
    """With thousands of keys every class is full and the bitmap wide: the OR'd bits are the whole map's
    to the byte, before and after the deferred blobs are put, and every key's lookup equals it."""
    log = many_keys
    whole = in_process_offset_map(log, first_dirty).native
    assert whole is not None
    bits = cleaner.native.dump_superseded_bits(whole)
    assert bits is not None and len(bits) > 16 + 8 * ((40_000 - first_dirty) // 64 - 1)
    end = log.active_segment.base_offset
    splits = plan_splits(log.directory, from_offset=first_dirty, until_offset=end, max_split_bytes=100_000)
    tasks = class_tasks(0, splits, first_dirty, [], classes)
    assert ored_class_bits(tasks) == bits
    ticket = JobTicket.create(str(log.directory), end)
    paths = []
    for task in tasks:
        paths.append(blob_path(str(log.directory), end, task.key_class))
        write_partial_map(replace(task, blob_path=paths[-1]), ticket.ref)
    ticket.close()
    lookup, size, _spilled = range_lookup(None, paths)
    key_map = cleaner.native.native_key_map(lookup)
    assert key_map is not None and size == len(whole)
    assert cleaner.native.dump_superseded_bits(key_map) == bits  # the blobs are still deferred
    keys = [b"key-%d" % i for i in range(3_100)]
    assert [lookup(key) for key in keys] == [whole.get(key) for key in keys]  # the blobs are put
    assert len(key_map) == len(whole) and cleaner.native.dump_superseded_bits(key_map) == bits
    for path in paths:
        Path(path).unlink()


def test_a_key_class_map_takes_only_its_keys_and_the_class_is_the_same_without_c(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    native = cleaner.native._native
    assert native is not None
    keys = [b"", b"a", b"key-12345678", b"x" * 7, b"y" * 8, b"z" * 9, b"w" * 100]
    keys += [b"k%d" % i for i in range(500)]
    classes = 3
    in_c = [cleaner.native.key_class(key, classes) for key in keys]
    assert set(in_c) == {0, 1, 2}
    maps = [native.KeyMap() for _ in range(classes)]
    for k, key_map in enumerate(maps):
        cleaner.native.set_key_class(key_map, k, classes)
        for offset, key in enumerate(keys):
            key_map.put(key, offset)
        assert sorted(partial_maps._entries_of(cleaner.native.dump_key_map(key_map)).values()) == [
            offset for offset, c in enumerate(in_c) if c == k
        ]
    with pytest.raises(ValueError, match="needs an empty KeyMap"):
        cleaner.native.set_key_class(maps[0], 0, classes)
    with pytest.raises(ValueError, match="key class 3 of 3"):
        cleaner.native.set_key_class(native.KeyMap(), 3, classes)
    monkeypatch.setattr(cleaner.native, "_native", None)
    assert [cleaner.native.key_class(key, classes) for key in keys] == in_c


def test_a_deferred_blob_is_checked_now_and_a_cut_bitmap_is_refused() -> None:
    native = cleaner.native._native
    assert native is not None
    source = native.KeyMap()
    source.put(b"a", 1)
    blob = cleaner.native.dump_key_map(source)
    with pytest.raises(ValueError, match="runs past its end"):
        cleaner.native.defer_key_map(native.KeyMap(), blob[:-1])
    with pytest.raises(ValueError, match="not a superseded bitmap"):
        cleaner.native.or_superseded_bits(native.KeyMap(), b"\0" * 20)
    target = native.KeyMap()
    cleaner.native.defer_key_map(target, blob)
    assert (target.get(b"a"), target.get(b"b"), len(target)) == (1, -1, 1)


def test_a_class_file_is_mapped_once_and_again_only_if_it_is_not_complete(many_keys: PartitionLog) -> None:
    """Tasks starting on different classes each find the other's file done; a file cut short (a task that
    died while writing it) is mapped again, the complete ones are left as they are."""
    log = many_keys
    end = log.active_segment.base_offset
    splits = plan_splits(log.directory, from_offset=0, until_offset=end, max_split_bytes=1 << 30)
    ticket = JobTicket.create(str(log.directory), end)
    tasks = [
        replace(task, blob_path=blob_path(str(log.directory), end, task.key_class))
        for task in class_tasks(0, splits, 0, [], 3)
    ]
    paths = [Path(task.blob_path) for task in tasks]
    try:
        for first in (1, 0, 2):
            with TaskTicket(ticket.ref) as held:
                ensure_class_files(tasks, first, held)
        stamps = [path.stat().st_mtime_ns for path in paths]
        sizes = [path.stat().st_size for path in paths]
        with open(paths[1], "r+b") as file:
            file.truncate(sizes[1] - 1)
        with TaskTicket(ticket.ref) as held:
            ensure_class_files(tasks, 0, held)
        assert [path.stat().st_size for path in paths] == sizes
        assert paths[0].stat().st_mtime_ns == stamps[0] and paths[2].stat().st_mtime_ns == stamps[2]
        lookup, size, _spilled = range_lookup(None, [str(path) for path in paths])
        whole = in_process_offset_map(log, 0)
        keys = [b"key-%d" % i for i in range(3_100)]
        assert size == whole.size and [lookup(key) for key in keys] == [whole.get(key) for key in keys]
    finally:
        ticket.close()
        for path in paths:
            path.unlink(missing_ok=True)


def transactions_of_two_producers(root: Path, codec: CompressionType) -> Writer:
    """Two producers' transactions in turn, interleaved, every third one aborted (and plain batches), with
    keys written again across them: committed data maps, aborted data must not."""
    ops = []
    for i in range(12):
        pid = TXN_PRODUCERS[i % 2]
        entries = tuple((KEYS[(i + j) % len(KEYS)], b"v%d" % i) for j in range(3))
        ops.append(Op("txn", pid, entries, codec=codec))
        ops.append(Op("put", -1, ((KEYS[i % len(KEYS)], b"p%d" % i),), codec=codec))
        ops.append(Op("txn", pid, entries[:1], codec=codec))
        ops.append(Op("end", pid, commit=i % 3 != 1))
    return written_log(root, compact_config(segment_bytes=600), ops)


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD])
def test_transactional_batches_of_a_map_by_key_hash_are_mapped_in_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: CompressionType
) -> None:
    """A class map reads committed and aborted transactional data and the markers in its C loop, given the
    aborted batches' offsets from the driver's replay: no batch through Python, and the map is the one the
    in-process round builds (aborted data not mapped)."""
    writer = transactions_of_two_producers(tmp_path / "t-0", codec)
    tasks = class_maps(writer, 0, 1 << 20, 2)
    assert tasks and tasks[0].aborted_batches, "the log has aborted transactions"
    left_to_python = []
    batch_here = SegmentChunks.batch_here

    def counted(chunks: SegmentChunks) -> RecordBatch:
        left_to_python.append(chunks.position)
        return batch_here(chunks)

    monkeypatch.setattr(SegmentChunks, "batch_here", counted)
    maps = []
    for task in tasks:
        class_map = partial_maps._task_map(task)
        partial_maps._map_into(task, class_map, spare_core=False)
        maps.append(class_map)
    assert left_to_python == []
    expected = in_process_offset_map(writer.log, 0)
    for key in KEYS:
        assert max(class_map.get(key) for class_map in maps) == expected.get(key)
    assert sum(class_map.size for class_map in maps) == expected.size
    writer.log.close()


def replayed(writer: Writer, first_dirty: int) -> tuple[object, ...]:
    plan = plan_round(writer.log, first_dirty, writer.log.active_segment.base_offset, START_MS)
    assert plan is not None
    return plan.map_scan, [group.txn_state.__getstate__() for group in plan.groups]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=configs, ops=operations, dirty_fraction=st.floats(0, 1))
def test_the_driver_s_replay_over_runs_of_plain_batches_equals_the_one_batch_by_batch(
    config: LogConfig, ops: list[Op], dirty_fraction: float
) -> None:
    """The transaction replay reads runs of plain batches in C (``scan_batch_runs``) as one step each: the
    groups' starting states and the map pass it replays are those of the replay batch by batch."""
    with random_log(config, ops, dirty_fraction) as (writer, first_dirty):
        in_runs = replayed(writer, first_dirty)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(round_plan, "scan_batch_runs", lambda *_args: None)
            assert replayed(writer, first_dirty) == in_runs


def test_a_run_of_plain_batches_is_cut_where_the_map_pass_starts() -> None:
    """Eight plain batches in one segment, an index entry per batch, the first dirty offset at the fifth:
    the map pass replayed counts the last four, as batch by batch."""
    config = compact_config(segment_bytes=4096, segment_index_bytes=1024, index_interval_bytes=1)
    with random_log(config, [Op("put", -1, ((b"a", b"x"),))] * 8, 0.5) as (writer, first_dirty):
        map_scan = replayed(writer, first_dirty)[0]
        assert isinstance(map_scan, MapScan) and (map_scan.records_read, first_dirty) == (4, 4)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(round_plan, "scan_batch_runs", lambda *_args: None)
            assert replayed(writer, first_dirty)[0] == map_scan

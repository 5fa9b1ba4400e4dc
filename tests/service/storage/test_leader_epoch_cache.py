"""``LeaderEpochCache``: Kafka's ``LeaderEpochFileCache`` rules for ``assign`` and the two truncations
(the cases of Kafka's ``LeaderEpochFileCacheTest``), and when the ``leader-epoch-checkpoint`` file on
disk follows the entries: at once, after a deferred ``flush``, or through an ``AtomicBatch``."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.storage.atomic_batch import AtomicBatch
from service.storage.leader_epoch_cache import LeaderEpochCache
from service.storage.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    read_leader_epoch_checkpoint,
)

E = EpochEntry


def cache_of(directory: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    """A cache with ``entries`` assigned in order (each written to the checkpoint as it is assigned)."""
    cache = LeaderEpochCache(directory)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def on_disk(directory: Path) -> list[EpochEntry] | None:
    return read_leader_epoch_checkpoint(directory)


THREE = ((2, 6), (3, 8), (4, 11))  # the entries most of Kafka's cases start from


@pytest.mark.parametrize(
    ("assigned", "expected"),
    [
        # shouldNotOverwriteLogEndOffsetForALeaderEpochOnceItHasBeenAssigned: the first start stays.
        (((2, 9), (2, 10)), [E(2, 9)]),
        # shouldEnforceMonotonicallyIncreasingStartOffsets: a new epoch at the same start replaces.
        (((2, 9), (3, 9)), [E(3, 9)]),
        # shouldEnforceMonotonicallyIncreasingEpochs: a lower epoch drops every entry at or above it.
        (((1, 5), (2, 6), (1, 7)), [E(1, 7)]),
        # shouldEnforceOffsetsIncreaseMonotonically: a lower start drops the entries starting above it.
        (((2, 6), (3, 5)), [E(3, 5)]),
        # shouldTruncateIfMatchingEpochButEarlierStartingOffset: the same epoch, earlier, moves back.
        (((5, 11), (6, 12), (7, 13), (7, 12)), [E(5, 11), E(7, 12)]),
        # A negative epoch (a batch of a producer that stamped none) is not an epoch.
        (((2, 6), (-1, 9)), [E(2, 6)]),
        # shouldIncreaseAndTrackEpochsAsFollowerReceivesManyMessages: one entry per epoch.
        (((0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (2, 6), (2, 8)), [E(0, 0), E(1, 3), E(2, 6)]),
    ],
)
def test_assign_keeps_epochs_and_start_offsets_ascending(
    tmp_path: Path, assigned: tuple[tuple[int, int], ...], expected: list[EpochEntry]
) -> None:
    cache = cache_of(tmp_path, *assigned)
    assert cache.entries == expected
    assert on_disk(tmp_path) == expected, "every change is written at once"


def test_assign_reports_whether_it_changed_anything_and_writes_only_then(tmp_path: Path) -> None:
    """An unchanged assign writes nothing (a batch per append must not cost a checkpoint write each):
    a marker put in the file survives it."""
    cache = LeaderEpochCache(tmp_path)
    assert cache.assign(2, 6)
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(b"marker")
    assert not cache.assign(2, 7)
    assert not cache.assign(-1, 100)
    assert path.read_bytes() == b"marker"
    assert cache.assign(3, 8)
    assert on_disk(tmp_path) == [E(2, 6), E(3, 8)]


def test_epoch_for_append_and_latest_epoch(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert (cache.latest_epoch, cache.epoch_for_append()) == (None, 0), "a log without entries appends as 0"
    cache.assign(4, 15)
    assert (cache.latest_epoch, cache.epoch_for_append()) == (4, 4)


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        (1, [E(2, 6), E(3, 8), E(4, 11)]),  # shouldNotClearAnythingIfOffsetTooEarly
        (6, [E(2, 6), E(3, 8), E(4, 11)]),  # shouldNotClearAnythingIfOffsetIsFirstOffset
        (8, [E(3, 8), E(4, 11)]),  # shouldPreserveResetOffsetOnClearEarliestIfOneExists
        (9, [E(3, 9), E(4, 11)]),  # shouldUpdateOffsetBetweenEpochBoundariesOnClearEarliest
        (11, [E(4, 11)]),  # shouldRetainLatestEpochOnClearAllEarliest
        (15, [E(4, 15)]),  # shouldRetainLatestEpochOnClearAllEarliestAndUpdateItsOffset
        (-1, [E(2, 6), E(3, 8), E(4, 11)]),  # shouldNotResetEpochHistoryHeadIfUndefinedPassed
    ],
)
def test_truncate_from_start_keeps_the_epoch_of_the_new_log_start(
    tmp_path: Path, offset: int, expected: list[EpochEntry]
) -> None:
    cache = cache_of(tmp_path, *THREE)
    cache.truncate_from_start(offset)
    assert cache.entries == expected
    assert on_disk(tmp_path) == expected
    assert not cache.has_unflushed_change


@pytest.mark.parametrize(
    ("offset", "expected"),
    [
        (8, [E(2, 6)]),  # shouldDropEntriesOnEpochBoundaryWhenRemovingLatestEntries
        (9, [E(2, 6), E(3, 8)]),  # shouldDropEntriesBetweenEpochBoundaryWhenRemovingNewest
        (12, [E(2, 6), E(3, 8), E(4, 11)]),  # past the last start: nothing to drop
        (6, []),  # at the first start: every entry goes
        (-1, [E(2, 6), E(3, 8), E(4, 11)]),  # shouldNotResetEpochHistoryTailIfUndefinedPassed
    ],
)
def test_truncate_from_end_drops_the_entries_starting_at_or_after_the_cut(
    tmp_path: Path, offset: int, expected: list[EpochEntry]
) -> None:
    cache = cache_of(tmp_path, *THREE)
    cache.truncate_from_end(offset)
    assert cache.entries == expected
    assert on_disk(tmp_path) == expected


def test_truncations_of_an_empty_cache_do_nothing(tmp_path: Path) -> None:
    """shouldClearEarliestOnEmptyCache, shouldClearLatestOnEmptyCache: no entry, no file written."""
    cache = LeaderEpochCache(tmp_path)
    cache.truncate_from_start(7)
    cache.truncate_from_end(7)
    cache.clear()
    assert cache.entries == [] and not cache.has_unflushed_change
    assert on_disk(tmp_path) is None


def test_clear_drops_every_entry_and_writes_the_empty_checkpoint(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, *THREE)
    cache.clear()
    assert cache.entries == [] and cache.latest_epoch is None
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n0\n"


def test_a_deferred_truncation_reaches_the_file_at_flush(tmp_path: Path) -> None:
    """Retention's ``truncateFromStartAsyncFlush``: the entries change now, the file keeps the older
    entries until ``flush`` (a crash meanwhile leaves entries the next load cuts again)."""
    cache = cache_of(tmp_path, *THREE)
    cache.truncate_from_start(9, flush=False)
    assert cache.entries == [E(3, 9), E(4, 11)]
    assert cache.has_unflushed_change
    assert on_disk(tmp_path) == [E(2, 6), E(3, 8), E(4, 11)]
    cache.flush()
    assert on_disk(tmp_path) == [E(3, 9), E(4, 11)]
    assert not cache.has_unflushed_change
    (tmp_path / LEADER_EPOCH_CHECKPOINT).unlink()
    cache.flush()
    assert on_disk(tmp_path) is None, "a flush with nothing left behind writes nothing"


def test_a_later_write_carries_a_deferred_truncation(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, *THREE)
    cache.truncate_from_end(11, flush=False)
    cache.assign(5, 12)
    assert not cache.has_unflushed_change
    assert on_disk(tmp_path) == [E(2, 6), E(3, 8), E(5, 12)]


def test_a_staged_flush_is_renamed_in_after_the_batch_sync(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, *THREE)
    batch = AtomicBatch()
    assert cache.stage_flush(batch) is None, "nothing to stage without a deferred truncation"
    cache.truncate_from_start(9, flush=False)
    token = cache.stage_flush(batch)
    assert token is not None
    assert on_disk(tmp_path) == [E(2, 6), E(3, 8), E(4, 11)], "staged, not yet renamed"
    batch.sync()
    assert cache.commit_flush(batch, token)
    batch.finish()
    assert on_disk(tmp_path) == [E(3, 9), E(4, 11)]
    assert not cache.has_unflushed_change
    assert sorted(p.name for p in tmp_path.iterdir()) == [LEADER_EPOCH_CHECKPOINT], "no .tmp left"


def test_a_staged_flush_overtaken_by_a_change_is_dropped(tmp_path: Path) -> None:
    """Entries that changed after staging are newer than the staged file: it is discarded, the cache stays
    unflushed, and the next flush writes the newer entries."""
    cache = cache_of(tmp_path, *THREE)
    cache.truncate_from_start(9, flush=False)
    batch = AtomicBatch()
    token = cache.stage_flush(batch)
    assert token is not None
    cache.truncate_from_start(10, flush=False)
    batch.sync()
    assert not cache.commit_flush(batch, token)
    batch.finish()
    assert on_disk(tmp_path) == [E(2, 6), E(3, 8), E(4, 11)]
    assert cache.has_unflushed_change
    assert sorted(p.name for p in tmp_path.iterdir()) == [LEADER_EPOCH_CHECKPOINT]
    cache.flush()
    assert on_disk(tmp_path) == [E(3, 10), E(4, 11)]


def test_a_staged_flush_overtaken_by_a_write_is_dropped(tmp_path: Path) -> None:
    cache = cache_of(tmp_path, *THREE)
    cache.truncate_from_start(9, flush=False)
    batch = AtomicBatch()
    token = cache.stage_flush(batch)
    assert token is not None
    cache.flush()  # written directly meanwhile
    batch.sync()
    assert not cache.commit_flush(batch, token)
    batch.finish()
    assert on_disk(tmp_path) == [E(3, 9), E(4, 11)]


def test_an_in_memory_cache_never_touches_the_directory(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path, [E(0, 0)], persist=False)
    cache.assign(1, 5)
    cache.truncate_from_start(6, flush=False)
    assert cache.stage_flush(AtomicBatch()) is None
    assert not cache.has_unflushed_change
    cache.truncate_from_end(6)
    cache.clear()
    cache.write()
    cache.create_file()
    assert list(tmp_path.iterdir()) == []


def test_create_file_makes_an_empty_checkpoint_and_keeps_an_existing_one(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    cache.create_file()
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b""
    assert on_disk(tmp_path) == [], "an empty file reads as no entries"
    cache.assign(1, 5)
    cache.create_file()
    assert on_disk(tmp_path) == [E(1, 5)]


def test_entries_survive_a_new_instance(tmp_path: Path) -> None:
    """shouldPersistEpochsBetweenInstances: a cache built from the file has the entries written."""
    cache_of(tmp_path, (2, 6), (3, 9))
    entries = on_disk(tmp_path)
    assert entries == [E(2, 6), E(3, 9)]
    reloaded = LeaderEpochCache(tmp_path, entries)
    assert not reloaded.assign(3, 10)
    assert reloaded.entries == [E(2, 6), E(3, 9)]


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(-1, 8), st.integers(0, 60)),
        st.tuples(st.just("start"), st.integers(-1, 60), st.booleans()),
        st.tuples(st.just("end"), st.integers(-1, 60), st.booleans()),
    ),
    max_size=25,
)


@given(OPS)
def test_entries_stay_strictly_ascending_in_both_fields(ops: list[tuple[str, int, int | bool]]) -> None:
    """Whatever the sequence of calls, epochs and start offsets both strictly ascend (the invariant the
    module docstring states and Kafka's ``OffsetsForLeaderEpoch`` answers rely on)."""
    cache = LeaderEpochCache(Path("/nonexistent"), persist=False)
    for op, number, extra in ops:
        if op == "assign":
            cache.assign(number, int(extra))
        elif op == "start":
            cache.truncate_from_start(number, flush=bool(extra))
        else:
            cache.truncate_from_end(number, flush=bool(extra))
        entries = cache.entries
        assert all(a.epoch < b.epoch for a, b in itertools.pairwise(entries))
        assert all(a.start_offset < b.start_offset for a, b in itertools.pairwise(entries))

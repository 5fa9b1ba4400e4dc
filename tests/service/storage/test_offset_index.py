"""OffsetIndex on real files: Kafka's OffsetIndexTest, laziness, preallocation, crashes, a model check."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.log_files import INDEX_SUFFIX, segment_path
from service.storage.offset_index import OffsetIndex, OffsetPosition, decode_entries, encode_entries

MakeIndex = Callable[..., OffsetIndex]
INT32_MAX = (1 << 31) - 1


@pytest.fixture
def make_index(tmp_path: Path) -> MakeIndex:
    def _make(*, base_offset: int = 0, max_index_size: int = 1000, **kwargs: Any) -> OffsetIndex:
        path = segment_path(tmp_path, base_offset, INDEX_SUFFIX)
        return OffsetIndex(path, base_offset, max_index_size, **kwargs)

    return _make


# -- laziness and file sizes ------------------------------------------------------------------------


def test_constructing_does_no_io(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "missing-dir" / "00000000000000000000.index", 0)
    assert not index.is_loaded
    assert not index.path.parent.exists()


def test_first_append_creates_a_preallocated_file(make_index: MakeIndex) -> None:
    index = make_index(max_index_size=1000)
    assert not index.path.exists()
    index.append(1, 0)
    assert index.path.stat().st_size == 1000
    assert index.max_entries == 125
    assert index.entries == 1
    assert index.size_in_bytes == 8


def test_preallocation_rounds_down_to_whole_entries(make_index: MakeIndex) -> None:
    index = make_index(max_index_size=1007)
    assert index.max_entries == 125  # first access creates the file (Kafka LazyIndex)
    assert index.path.stat().st_size == 1000


def test_read_only_index_of_a_missing_file_is_empty_and_creates_nothing(make_index: MakeIndex) -> None:
    index = make_index(writable=False)
    assert index.entries == 0
    assert index.lookup(5) == (0, 0)
    assert not index.path.exists()
    with pytest.raises(InvalidInputError, match="read-only"):
        index.append(1, 0)


def test_trim_sets_the_length_to_the_entries(make_index: MakeIndex) -> None:
    index = make_index()
    for n in range(1, 4):
        index.append(n, n * 100)
    index.trim_to_valid_size()
    assert index.path.stat().st_size == 24
    assert index.is_full()
    assert index.resize(1000)
    assert index.path.stat().st_size == 1000
    assert not index.is_full()


def test_trim_of_an_untouched_index_leaves_an_empty_file(make_index: MakeIndex) -> None:
    index = make_index()
    index.trim_to_valid_size()  # a rolled segment that never got an entry keeps an (empty) .index
    assert index.path.stat().st_size == 0


def test_resize_below_the_entries_is_refused(make_index: MakeIndex) -> None:
    index = make_index()
    index.append(1, 0)
    index.append(2, 10)
    with pytest.raises(InvalidInputError, match="entries use 16"):
        index.resize(15)


def test_close_trims_and_a_reopened_index_reads_the_same_entries_without_loading(
    make_index: MakeIndex,
) -> None:
    index = make_index(base_offset=45)
    for n in range(4):
        index.append(46 + n, n * 70)
    index.close()
    assert index.path.stat().st_size == 32

    reopened = make_index(base_offset=45)
    assert (reopened.entries, reopened.last_offset, reopened.size_in_bytes) == (4, 49, 32)
    assert not reopened.is_loaded  # length and last entry read without loading
    assert reopened.is_full()  # Kafka testReopen: a trimmed index is full until resized
    with pytest.raises(InvalidInputError, match="full"):
        reopened.append(60, 1000)
    assert [reopened.entry(n) for n in range(4)] == [(46, 0), (47, 70), (48, 140), (49, 210)]
    assert reopened.lookup(48) == (48, 140)


def test_an_untrimmed_file_after_a_crash_counts_its_whole_length(
    make_index: MakeIndex, tmp_path: Path
) -> None:
    index = make_index(base_offset=10)
    index.append(11, 0)
    index.append(12, 50)
    index.flush()
    crash_image = segment_path(tmp_path / "crashed", 10, INDEX_SUFFIX)
    crash_image.parent.mkdir()
    crash_image.write_bytes(index.path.read_bytes())  # the disk as a crash leaves it: still preallocated

    reopened = OffsetIndex(crash_image, 10, 1000)
    assert reopened.entries == 125  # Kafka: the whole length is entries, zero slots too
    assert reopened.entry(1) == (12, 50)
    assert reopened.entry(2) == (10, 0)  # a zero slot reads as (base offset, position 0)
    reopened.sanity_check()  # and passes: only recovery (a rebuild) can fix it
    reopened.reset()
    assert (reopened.entries, reopened.max_entries) == (0, 125)


def test_rename_before_the_file_exists_only_moves_the_path(make_index: MakeIndex, tmp_path: Path) -> None:
    index = make_index()
    deleted = index.path.with_name(index.path.name + ".deleted")
    index.rename_to(deleted)
    assert not deleted.exists() and not segment_path(tmp_path, 0, INDEX_SUFFIX).exists()
    index.append(3, 0)  # first access creates it under the new name
    assert deleted.stat().st_size == 1000
    assert not segment_path(tmp_path, 0, INDEX_SUFFIX).exists()


def test_rename_of_an_open_index_keeps_writing_to_the_moved_file(make_index: MakeIndex) -> None:
    index = make_index()
    index.append(1, 0)
    swapped = index.path.with_name(index.path.name + ".swap")
    index.rename_to(swapped)
    index.append(2, 10)
    index.close()
    assert decode_entries(swapped.read_bytes()) == [(1, 0), (2, 10)]


def test_delete_if_exists(make_index: MakeIndex) -> None:
    index = make_index()
    assert not index.delete_if_exists()
    index.append(1, 0)
    assert index.delete_if_exists()
    assert not index.path.exists()


# -- Kafka OffsetIndexTest --------------------------------------------------------------------------


def test_lookup_extreme_cases(make_index: MakeIndex) -> None:
    index = make_index(base_offset=45, max_index_size=30 * 8)
    assert index.lookup(45) == (45, 0)
    for n in range(index.max_entries):
        index.append(45 + n + 1, n)
    assert index.lookup(45) == (45, 0)
    assert index.lookup(45 + 30) == (75, 29)
    assert index.lookup(10**12) == (75, 29)


def test_lookup_finds_the_largest_offset_not_above_the_target(make_index: MakeIndex) -> None:
    index = make_index(base_offset=100)
    for offset, position in [(102, 0), (105, 70), (111, 140)]:
        index.append(offset, position)
    expected = {99: (100, 0), 101: (100, 0), 102: (102, 0), 104: (102, 0), 105: (105, 70), 200: (111, 140)}
    assert {target: index.lookup(target) for target in expected} == expected


def test_append_too_many(make_index: MakeIndex) -> None:
    index = make_index(max_index_size=3 * 8)
    for n in range(3):
        index.append(n, n)
    assert index.is_full()
    with pytest.raises(InvalidInputError, match="full"):
        index.append(3, 3)


@pytest.mark.parametrize("second_offset", [50, 51])
def test_append_out_of_order(make_index: MakeIndex, second_offset: int) -> None:
    index = make_index()
    index.append(51, 0)
    with pytest.raises(InvalidInputError, match="not larger than the last offset 51"):
        index.append(second_offset, 1)


@pytest.mark.parametrize(
    ("offset", "position"), [(9, 0), (10 + INT32_MAX + 1, 0), (11, -1), (11, INT32_MAX + 1)]
)
def test_append_out_of_range(make_index: MakeIndex, offset: int, position: int) -> None:
    with pytest.raises(InvalidInputError):
        make_index(base_offset=10).append(offset, position)


def test_truncate_to(make_index: MakeIndex) -> None:
    index = make_index(max_index_size=10 * 8)
    for n in range(1, 10):
        index.append(n, n)
    index.truncate_to(12)
    assert (index.entries, index.lookup(10)) == (9, (9, 9))
    index.truncate_to(10)
    assert (index.entries, index.lookup(10)) == (9, (9, 9))
    index.truncate_to(9)
    assert (index.entries, index.lookup(10)) == (8, (8, 8))
    index.truncate_to(5)
    assert (index.entries, index.lookup(10)) == (4, (4, 4))
    index.truncate_to(0)
    assert (index.entries, index.lookup(10)) == (0, (0, 0))
    index.append(0, 0)  # the space is reusable
    index.truncate()
    assert index.entries == 0


def test_entry_out_of_range(make_index: MakeIndex) -> None:
    with pytest.raises(InvalidInputError):
        make_index().entry(0)


def test_sanity_last_offset_equal_to_base_offset(make_index: MakeIndex) -> None:
    index = make_index(base_offset=20)
    index.append(20, 10)
    index.sanity_check()


# -- corruption -------------------------------------------------------------------------------------


def test_sanity_check_of_a_missing_file_passes_and_creates_nothing(make_index: MakeIndex) -> None:
    index = make_index()
    index.sanity_check()
    assert not index.path.exists()


def test_a_two_byte_index_fails_its_sanity_check(make_index: MakeIndex) -> None:
    index = make_index()
    index.path.write_bytes(b"\x00\x01")
    assert index.entries == 0
    with pytest.raises(CorruptDataError, match="not a multiple of 8") as caught:
        index.sanity_check()
    assert caught.value.path == str(index.path)


def test_a_last_offset_below_the_base_fails_its_sanity_check(make_index: MakeIndex) -> None:
    index = make_index(base_offset=100)
    index.path.write_bytes(encode_entries([(100, 0)], base_offset=100) + b"\xff\xff\xff\xff\x00\x00\x00\x00")
    with pytest.raises(CorruptDataError, match="last offset 99 is below the base offset 100") as caught:
        index.sanity_check()
    assert (caught.value.path, caught.value.position) == (str(index.path), 8)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(data=st.binary(max_size=100))
def test_arbitrary_file_bytes_raise_only_corrupt_data_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(data)
    index = OffsetIndex(path, 0)
    with suppress(CorruptDataError):
        index.sanity_check()
    assert index.entries == len(data) // 8
    index.lookup(5)
    with pytest.raises(CorruptDataError) if len(data) % 8 else nullcontext():
        decode_entries(data)


# -- codec ------------------------------------------------------------------------------------------

_entries = st.lists(st.tuples(st.integers(0, INT32_MAX), st.integers(0, INT32_MAX)), max_size=50)


@given(base_offset=st.integers(0, 2**62), entries=_entries)
def test_encode_decode_round_trip(base_offset: int, entries: list[tuple[int, int]]) -> None:
    absolute = [(base_offset + relative, position) for relative, position in entries]
    data = encode_entries(absolute, base_offset)
    assert len(data) == 8 * len(entries)
    assert decode_entries(data, base_offset) == absolute


def test_entry_layout_is_big_endian_relative_offset_then_position() -> None:
    assert encode_entries([(1005, 4096)], base_offset=1000) == b"\x00\x00\x00\x05\x00\x00\x10\x00"
    assert decode_entries(b"\x00\x00\x00\x05\x00\x00\x10\x00", 1000) == [OffsetPosition(1005, 4096)]


@pytest.mark.parametrize("entry", [(999, 0), (1000, -1), (1000 + INT32_MAX + 1, 0)])
def test_encode_rejects_what_does_not_fit(entry: tuple[int, int]) -> None:
    with pytest.raises(InvalidInputError):
        encode_entries([entry], base_offset=1000)


# -- model check ------------------------------------------------------------------------------------


class OffsetIndexMachine(RuleBasedStateMachine):
    """OffsetIndex against a list of (offset, position) and a capacity, through close/reopen cycles."""

    SLOTS = 16

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.base_offset = 100
        self.max_index_size = 8 * self.SLOTS + 3
        self.path = directory / "00000000000000000100.index"
        self.path.unlink(missing_ok=True)
        self.index = OffsetIndex(self.path, self.base_offset, self.max_index_size)
        self.model: list[tuple[int, int]] = []
        self.capacity = self.SLOTS  # what a new file holds

    def _last(self) -> int:
        return self.model[-1][0] if self.model else self.base_offset - 1

    @rule(gap=st.integers(1, 4), position=st.integers(0, 10_000))
    def append(self, gap: int, position: int) -> None:
        offset = self._last() + gap
        if len(self.model) >= self.capacity:
            with pytest.raises(InvalidInputError, match="full"):
                self.index.append(offset, position)
        else:
            self.index.append(offset, position)
            self.model.append((offset, position))

    @rule(back=st.integers(0, 3))
    def append_not_increasing(self, back: int) -> None:
        with pytest.raises(InvalidInputError):
            self.index.append(self._last() - back, 0)

    @rule(target_offset=st.integers(95, 170))
    def lookup(self, target_offset: int) -> None:
        below = [entry for entry in self.model if entry[0] <= target_offset]
        assert self.index.lookup(target_offset) == (below[-1] if below else (self.base_offset, 0))

    @rule(target_offset=st.integers(95, 170))
    def truncate_to(self, target_offset: int) -> None:
        self.index.truncate_to(target_offset)
        self.model = [entry for entry in self.model if entry[0] < target_offset]

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def truncate_to_an_entry(self, data: st.DataObject) -> None:
        target_offset = data.draw(st.sampled_from([offset for offset, _ in self.model]))
        self.truncate_to(target_offset)

    @rule()
    def truncate(self) -> None:
        self.index.truncate()
        self.model = []

    @rule()
    def flush(self) -> None:
        self.index.flush()

    @rule(resize=st.booleans())
    def close_and_reopen(self, resize: bool) -> None:
        self.index.close()
        assert self.path.stat().st_size == 8 * len(self.model)
        self.index = OffsetIndex(self.path, self.base_offset, self.max_index_size)
        self.capacity = len(self.model)
        if resize:  # what the loader does for the active segment
            assert self.index.resize(self.max_index_size) == (self.capacity != self.SLOTS)
            self.capacity = self.SLOTS

    @invariant()
    def matches_the_model(self) -> None:
        assert self.index.entries == len(self.model)
        assert self.index.last_offset == (self.model[-1][0] if self.model else self.base_offset)
        assert self.index.is_full() == (len(self.model) >= self.capacity)

    def teardown(self) -> None:
        self.index.close()


def test_offset_index_matches_the_model(tmp_path: Path) -> None:
    class Machine(OffsetIndexMachine):
        def __init__(self) -> None:
            super().__init__(tmp_path)

    # Older hypothesis releases leave this unannotated; newer ones type it.
    run_state_machine_as_test(
        Machine, settings=settings(max_examples=60, stateful_step_count=40, deadline=None)
    )  # type: ignore[no-untyped-call,unused-ignore]


def test_append_many_equals_appends_and_adds_nothing_when_one_entry_is_refused(make_index: MakeIndex) -> None:
    one_by_one, bulk = make_index(base_offset=10), make_index(base_offset=20, max_index_size=800)
    for offset, position in ((12, 0), (15, 40), (20, 90)):
        one_by_one.append(offset, position)
    bulk.append_many([22, 25, 30], [0, 40, 90])
    assert [bulk.entry(i) for i in range(3)] == [
        OffsetPosition(one_by_one.entry(i).offset + 10, one_by_one.entry(i).position) for i in range(3)
    ]
    for offsets, positions in (([31, 31], [100, 110]), ([35, 19], [100, 110]), ([35], [-1])):
        with pytest.raises(InvalidInputError):
            bulk.append_many(offsets, positions)
        assert bulk.entries == 3
    with pytest.raises(InvalidInputError, match="cannot append 98 entries"):
        bulk.append_many(list(range(40, 138)), [100] * 98)  # 100 slots in 800 bytes, 3 used

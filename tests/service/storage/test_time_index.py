"""TimeIndex on real files: Kafka's TimeIndexTest, a segment's lookups and truncation, the reserved
slot, tail reads, a model check."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.log_files import TIME_INDEX_SUFFIX, segment_path
from service.storage.time_index import TimeIndex, TimestampOffset, decode_entries, encode_entries

MakeIndex = Callable[..., TimeIndex]
INT32_MAX = (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


@pytest.fixture
def make_index(tmp_path: Path) -> MakeIndex:
    def _make(*, base_offset: int = 0, max_index_size: int = 1000, **kwargs: Any) -> TimeIndex:
        path = segment_path(tmp_path, base_offset, TIME_INDEX_SUFFIX)
        return TimeIndex(path, base_offset, max_index_size, **kwargs)

    return _make


def append_entries(index: TimeIndex, count: int) -> None:
    """Kafka TimeIndexTest.appendEntries: (10, base + 10), (20, base + 20), ..."""
    for n in range(1, count + 1):
        index.append(n * 10, n * 10 + index.base_offset)


# -- laziness, sizes, the reserved slot ---------------------------------------------------------------


def test_constructing_does_no_io_and_first_append_preallocates(make_index: MakeIndex) -> None:
    index = make_index(max_index_size=1000)
    assert not index.path.exists() and not index.is_loaded
    index.append(5, 1)
    assert index.path.stat().st_size == 996  # 83 whole 12-byte entries
    assert index.max_entries == 83


def test_the_last_slot_is_reserved_for_the_roll_entry(make_index: MakeIndex) -> None:
    index = make_index(max_index_size=4 * 12)
    append_entries(index, 3)
    assert index.is_full()
    with pytest.raises(InvalidInputError, match="full"):
        index.append(100, 100)
    assert index.append(100, 100, skip_full_check=True)
    index.trim_to_valid_size()
    assert index.path.stat().st_size == 48
    assert index.last_entry() == (100, 100)


def test_skip_full_check_past_the_last_slot_grows_the_file(make_index: MakeIndex) -> None:
    index = make_index(max_index_size=12)
    index.append(7, 3, skip_full_check=True)
    index.append(8, 4, skip_full_check=True)
    index.flush()  # appended entries reach the file when it is flushed, trimmed or closed
    assert (index.entries, index.max_entries, index.path.stat().st_size) == (2, 2, 24)


def test_close_trims_and_reopen_reads_the_last_entry_from_the_tail(make_index: MakeIndex) -> None:
    index = make_index(base_offset=45)
    append_entries(index, 5)
    index.close()
    assert index.path.stat().st_size == 60
    reopened = make_index(base_offset=45)
    assert reopened.last_entry() == (50, 95)
    assert reopened.max_timestamp == 50
    assert reopened.entries == 5
    assert not reopened.is_loaded
    assert reopened.lookup(35) == (30, 75)
    assert reopened.is_loaded


def test_last_entry_reads_only_the_last_12_bytes(make_index: MakeIndex) -> None:
    index = make_index(base_offset=1000)
    garbage = bytes(range(200, 236))  # three entries' worth that decode to nonsense
    index.path.write_bytes(garbage + encode_entries([(1_700_000_000_000, 1042)], base_offset=1000))
    assert index.last_entry() == TimestampOffset(1_700_000_000_000, 1042)
    assert index.entries == 4
    assert not index.is_loaded


def test_last_entry_of_an_empty_or_missing_index(make_index: MakeIndex) -> None:
    assert make_index(base_offset=7, writable=False).last_entry() == (-1, 7)
    index = make_index(base_offset=7)
    assert index.last_entry() == (-1, 7)
    assert index.max_timestamp == -1


def test_an_untrimmed_file_after_a_crash_counts_its_whole_length(
    make_index: MakeIndex, tmp_path: Path
) -> None:
    index = make_index(base_offset=10, max_index_size=120)
    index.append(1000, 11)
    index.flush()
    crash_image = tmp_path / "crash.timeindex"
    crash_image.write_bytes(index.path.read_bytes())
    reopened = TimeIndex(crash_image, 10, 120)
    assert reopened.entries == 10
    assert reopened.last_entry() == (0, 10)  # a zero slot
    with pytest.raises(CorruptDataError, match="last timestamp 0 is below the first timestamp 1000"):
        reopened.sanity_check()


def test_rename_before_the_file_exists_only_moves_the_path(make_index: MakeIndex) -> None:
    index = make_index()
    original = index.path
    cleaned = original.with_name(original.name + ".cleaned")
    index.rename_to(cleaned)
    assert not original.exists() and not cleaned.exists()
    index.append(1, 1)
    index.close()
    assert decode_entries(cleaned.read_bytes()) == [(1, 1)]


# -- append rules -------------------------------------------------------------------------------------


def test_append_keeps_timestamps_strictly_increasing(make_index: MakeIndex) -> None:
    index = make_index(base_offset=100)
    assert not index.append(-1, 100)  # no timestamp: the index stays empty
    assert index.append(50, 101)
    assert not index.append(50, 102)
    assert not index.append(40, 103)
    assert index.append(60, 103)
    assert [index.entry(n) for n in range(index.entries)] == [(50, 101), (60, 103)]


def test_append_refuses_an_offset_below_the_last_one(make_index: MakeIndex) -> None:
    index = make_index(base_offset=100)
    index.append(50, 110)
    with pytest.raises(InvalidInputError, match="below the last offset 110"):
        index.append(60, 109)
    with pytest.raises(InvalidInputError, match="below the last offset 110"):
        index.append(40, 109)  # whatever the timestamp (Kafka checks the offset first)
    assert index.append(60, 110)  # an equal offset is allowed


@pytest.mark.parametrize(("timestamp", "offset"), [(1, 99), (1, 100 + INT32_MAX + 1), (INT64_MAX + 1, 100)])
def test_append_out_of_range(make_index: MakeIndex, timestamp: int, offset: int) -> None:
    with pytest.raises(InvalidInputError):
        make_index(base_offset=100).append(timestamp, offset)


# -- Kafka TimeIndexTest (base 45, 30 slots) ----------------------------------------------------------


@pytest.fixture
def kafka_index(make_index: MakeIndex) -> TimeIndex:
    return make_index(base_offset=45, max_index_size=30 * 12)


def test_kafka_lookup(kafka_index: TimeIndex) -> None:
    assert kafka_index.lookup(100) == (-1, 45)
    append_entries(kafka_index, 29)
    assert kafka_index.lookup(9) == (-1, 45)
    assert kafka_index.lookup(25) == (20, 65)
    assert kafka_index.lookup(30) == (30, 75)


def test_kafka_entry(kafka_index: TimeIndex) -> None:
    append_entries(kafka_index, 29)
    assert [kafka_index.entry(n) for n in range(4)] == [(10, 55), (20, 65), (30, 75), (40, 85)]
    with pytest.raises(InvalidInputError):
        kafka_index.entry(29)


def test_kafka_truncate(kafka_index: TimeIndex) -> None:
    append_entries(kafka_index, 29)
    kafka_index.truncate()
    assert kafka_index.entries == 0
    append_entries(kafka_index, 29)
    kafka_index.truncate_to(10 + 45)
    assert kafka_index.entries == 0


def test_kafka_append(kafka_index: TimeIndex) -> None:
    append_entries(kafka_index, 29)
    with pytest.raises(InvalidInputError, match="full"):
        kafka_index.append(10_000, 1000)
    with pytest.raises(InvalidInputError, match="below the last offset"):
        kafka_index.append(10_000, 28 * 10, skip_full_check=True)
    assert kafka_index.append(10_000, 1000, skip_full_check=True)


def test_kafka_sanity_check(kafka_index: TimeIndex, tmp_path: Path) -> None:
    kafka_index.sanity_check()
    append_entries(kafka_index, 5)
    kafka_index.sanity_check()
    kafka_index.close()
    good = kafka_index.path.read_bytes()
    cases = {
        "offset 44 is below the base offset 45": good[:-12]
        + encode_entries([(50, 45)], 45)[:8]
        + b"\xff" * 4,
        "last timestamp 9 is below the first timestamp 10": good[:-12] + encode_entries([(9, 95)], 45),
        "length 59 is not a multiple of 12": good[:-1],
    }
    for message, data in cases.items():
        kafka_index.path.write_bytes(data)
        with pytest.raises(CorruptDataError, match=message) as caught:
            TimeIndex(kafka_index.path, 45, 30 * 12).sanity_check()
        assert caught.value.path == str(kafka_index.path)


# -- segment scenarios ----------------------------------------------------------------------------------


def segment_time_index(index: TimeIndex, records: int, *, close: bool) -> dict[int, int]:
    """Index one-record batches (offset o, timestamp 10 * o) as LogSegment does, interval 2 * batch - 1."""
    timestamps = {}
    bytes_since_entry, batch, interval = 0, 70, 2 * 70 - 1
    for offset in range(index.base_offset, index.base_offset + records):
        timestamps[offset] = offset * 10
        if bytes_since_entry > interval:
            index.append(offset * 10, offset)
            bytes_since_entry = 0
        bytes_since_entry += batch
    if close:
        last = max(timestamps)
        index.append(timestamps[last], last, skip_full_check=True)
    return timestamps


def find_offset_by_timestamp(index: TimeIndex, timestamps: dict[int, int], target: int) -> int | None:
    """LogSegment.findOffsetByTimestamp: from the time index entry, the first record with ts ≥ target."""
    start = index.lookup(target).offset
    return next(
        (offset for offset in sorted(timestamps) if offset >= start and timestamps[offset] >= target), None
    )


def test_find_offset_by_timestamp(make_index: MakeIndex) -> None:
    index = make_index(base_offset=40)
    timestamps = segment_time_index(index, 10, close=True)
    assert index.max_timestamp == 490
    assert [index.entry(n) for n in range(index.entries)] == [
        (420, 42),
        (440, 44),
        (460, 46),
        (480, 48),
        (490, 49),
    ]
    expected = {420: 42, 421: 43, 430: 43, 431: 44, 491: None, 401: 41, 399: 40}
    assert {ts: find_offset_by_timestamp(index, timestamps, ts) for ts in expected} == expected


def test_truncation_below_the_first_entry_empties_the_index(make_index: MakeIndex) -> None:
    index = make_index(base_offset=40)
    segment_time_index(index, 30, close=False)
    assert index.entries == 14  # appends 3, 5, ..., 29
    index.truncate_to(41)
    assert index.entries == 0
    assert index.last_entry() == (-1, 40)


# -- codec ------------------------------------------------------------------------------------------------


@given(
    base_offset=st.integers(0, 2**62),
    entries=st.lists(st.tuples(st.integers(INT64_MIN, INT64_MAX), st.integers(0, INT32_MAX)), max_size=50),
)
def test_encode_decode_round_trip(base_offset: int, entries: list[tuple[int, int]]) -> None:
    absolute = [(timestamp, base_offset + relative) for timestamp, relative in entries]
    data = encode_entries(absolute, base_offset)
    assert len(data) == 12 * len(entries)
    assert decode_entries(data, base_offset) == absolute


def test_bulk_decode_across_chunks_of_entries(make_index: MakeIndex) -> None:
    entries = [(1_000_000 + 3 * n, 500 + n) for n in range(2500)]
    assert decode_entries(encode_entries(entries, 500), 500) == entries
    index = make_index(base_offset=500)
    index.path.write_bytes(encode_entries(entries, 500))
    assert index.lookup(1_000_000 + 3 * 2000 + 1) == (1_006_000, 2500)
    assert index.entry(2499) == entries[-1]


def test_entry_layout_is_big_endian_timestamp_then_relative_offset() -> None:
    data = b"\x00\x00\x01\x8b\xcf\xe5\x68\x00\x00\x00\x00\x2a"
    assert encode_entries([(1_700_000_000_000, 1042)], base_offset=1000) == data
    assert decode_entries(data, 1000) == [TimestampOffset(1_700_000_000_000, 1042)]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(data=st.binary(max_size=100))
def test_arbitrary_file_bytes_raise_only_corrupt_data_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(data)
    index = TimeIndex(path, 0)
    with suppress(CorruptDataError):
        index.sanity_check()
    index.last_entry()
    assert index.entries == len(data) // 12
    index.lookup(5)
    with pytest.raises(CorruptDataError) if len(data) % 12 else nullcontext():
        decode_entries(data)


# -- model check ------------------------------------------------------------------------------------------


class TimeIndexMachine(RuleBasedStateMachine):
    """TimeIndex against a list of (timestamp, offset) and a capacity, through close/reopen cycles."""

    SLOTS = 8

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.base_offset = 100
        self.max_index_size = 12 * self.SLOTS + 5
        self.path = directory / "00000000000000000100.timeindex"
        self.path.unlink(missing_ok=True)
        self.index = TimeIndex(self.path, self.base_offset, self.max_index_size)
        self.model: list[tuple[int, int]] = []
        self.capacity = self.SLOTS

    def _last(self) -> tuple[int, int]:
        return self.model[-1] if self.model else (-1, self.base_offset)

    @rule(ts_step=st.integers(-2, 5), offset_step=st.integers(0, 3), skip_full_check=st.booleans())
    def append(self, ts_step: int, offset_step: int, skip_full_check: bool) -> None:
        last_timestamp, last_offset = self._last()
        timestamp, offset = last_timestamp + ts_step, last_offset + offset_step
        if not skip_full_check and len(self.model) >= self.capacity - 1:
            with pytest.raises(InvalidInputError, match="full"):
                self.index.append(timestamp, offset)
            return
        appended = self.index.append(timestamp, offset, skip_full_check=skip_full_check)
        assert appended == (timestamp > last_timestamp)
        if appended:
            self.model.append((timestamp, offset))
            self.capacity = max(self.capacity, len(self.model))

    @rule(back=st.integers(1, 3))
    def append_offset_backwards(self, back: int) -> None:
        with pytest.raises(InvalidInputError):
            self.index.append(self._last()[0] + 1, self._last()[1] - back, skip_full_check=True)

    @rule(target_timestamp=st.integers(-3, 40))
    def lookup(self, target_timestamp: int) -> None:
        below = [entry for entry in self.model if entry[0] <= target_timestamp]
        assert self.index.lookup(target_timestamp) == (below[-1] if below else (-1, self.base_offset))

    @rule(target_offset=st.integers(98, 130))
    def truncate_to(self, target_offset: int) -> None:
        self.index.truncate_to(target_offset)
        self.model = [entry for entry in self.model if entry[1] < target_offset]

    @rule()
    def truncate(self) -> None:
        self.index.truncate()
        self.model = []

    @rule(resize=st.booleans())
    def close_and_reopen(self, resize: bool) -> None:
        self.index.close()
        assert self.path.stat().st_size == 12 * len(self.model)
        self.index = TimeIndex(self.path, self.base_offset, self.max_index_size)
        assert self.index.last_entry() == self._last()
        assert not self.index.is_loaded
        self.capacity = len(self.model)
        if resize and self.capacity <= self.SLOTS:
            self.index.resize(self.max_index_size)
            self.capacity = self.SLOTS

    @invariant()
    def matches_the_model(self) -> None:
        assert self.index.entries == len(self.model)
        assert self.index.last_entry() == self._last()
        assert self.index.max_timestamp == self._last()[0]
        assert self.index.is_full() == (len(self.model) >= self.capacity - 1)

    def teardown(self) -> None:
        self.index.close()


def test_time_index_matches_the_model(tmp_path: Path) -> None:
    class Machine(TimeIndexMachine):
        def __init__(self) -> None:
            super().__init__(tmp_path)

    # Older hypothesis releases leave this unannotated; newer ones type it.
    run_state_machine_as_test(
        Machine, settings=settings(max_examples=60, stateful_step_count=40, deadline=None)
    )  # type: ignore[no-untyped-call,unused-ignore]


def test_append_many_equals_appends_and_adds_nothing_when_one_entry_is_refused(make_index: MakeIndex) -> None:
    pairs = ((5, 12), (5, 13), (4, 14), (9, 14), (11, 20))  # equal or lower timestamps are skipped
    one_by_one, bulk = make_index(base_offset=10), make_index(base_offset=11, max_index_size=120)
    written = [one_by_one.append(timestamp, offset) for timestamp, offset in pairs]
    assert bulk.append_many([t for t, _ in pairs], [o for _, o in pairs]) == sum(written) == 3
    assert [bulk.entry(i) for i in range(3)] == [one_by_one.entry(i) for i in range(3)]  # absolute offsets
    with pytest.raises(InvalidInputError, match="below the last offset"):
        bulk.append_many([30, 31], [25, 19])
    assert bulk.entries == 3
    with pytest.raises(InvalidInputError, match="cannot append 7 entries"):
        bulk.append_many(list(range(40, 47)), list(range(30, 37)))  # 10 slots, the last reserved, 3 used
    bulk.append_many(list(range(40, 46)), list(range(30, 36)))
    assert bulk.entries == 9

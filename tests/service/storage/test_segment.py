"""``LogSegment``: ``append_batches`` (one write for a run of batches, as the cleaner's C filter hands them
over) against one ``append`` per batch, the index rule's definition (the same file, index entries and
largest timestamp); and ``record_count``, kept as the segment grows (each batch header read once), against
the records appended: after any run of appends, counts and truncations it says what the file holds."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.base.errors import CorruptDataError
from service.storage.log_config import LogConfig
from service.storage.records import Record, encode_batch
from service.storage.segment import LogSegment

BASE = 1_000
batches = st.lists(
    st.tuples(st.integers(0, 300), st.integers(1, 5), st.integers(-1, 50)),  # size (0: dropped), offsets, ts
    min_size=1,
    max_size=40,
)


def state(segment: LogSegment) -> tuple[object, ...]:
    offsets = [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)]
    times = [segment.time_index.entry(i) for i in range(segment.time_index.entries)]
    return (
        segment.log_path.read_bytes(),
        segment.size_bytes,
        offsets,
        times,
        segment.max_timestamp_so_far,
        segment.offset_of_max_timestamp,
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    spec=batches,
    cuts=st.lists(st.integers(0, 40), max_size=5),
    interval=st.sampled_from([1, 100, 4096]),
    grow=st.booleans(),
)
def test_append_batches_equals_one_append_per_batch(
    tmp_path_factory: pytest.TempPathFactory,
    spec: list[tuple[int, int, int]],
    cuts: list[int],
    interval: int,
    grow: bool,
) -> None:
    """``grow``: indexes that grow as entries come (a ``.cleaned`` segment's), from a small size, so that
    the bulk append resizes them; compared once the segment is closed (trimmed)."""
    config = LogConfig(index_interval_bytes=interval, segment_index_bytes=24 if grow else 10 * 1024 * 1024)
    sizes, last_offsets, timestamps, data = [], [], [], []
    offset = BASE
    for i, (size, records, timestamp) in enumerate(spec):
        offset += records
        sizes.append(size)
        last_offsets.append(offset)
        timestamps.append(timestamp)
        data.append(bytes([i % 256]) * size)

    one_by_one = LogSegment.create(
        tmp_path_factory.mktemp("one"), BASE, config=config, now_ms=0, indexes_grow=grow
    )
    for size, last, timestamp, chunk in zip(sizes, last_offsets, timestamps, data, strict=True):
        if size:
            one_by_one.append(
                chunk, largest_offset=last, max_timestamp=timestamp, offset_of_max_timestamp=last
            )

    in_runs = LogSegment.create(
        tmp_path_factory.mktemp("runs"), BASE, config=config, now_ms=0, indexes_grow=grow
    )
    bounds = sorted({0, len(spec), *(min(c, len(spec)) for c in cuts)})
    for start, stop in pairwise(bounds):
        in_runs.append_batches(
            b"".join(data[start:stop]), sizes[start:stop], last_offsets[start:stop], timestamps[start:stop]
        )
    assert state(in_runs) == state(one_by_one)
    if grow:
        for segment in (in_runs, one_by_one):
            segment.on_become_inactive()
            segment.close_file()
        assert state(in_runs) == state(one_by_one)
        assert [p.read_bytes() for p in sorted(in_runs.log_path.parent.iterdir())] == [
            p.read_bytes() for p in sorted(one_by_one.log_path.parent.iterdir())
        ]


def test_sizes_that_do_not_add_up_are_refused(tmp_path: Path) -> None:
    segment = LogSegment.create(tmp_path, BASE, config=LogConfig(), now_ms=0)
    with pytest.raises(ValueError, match="add up to 3"):
        segment.append_batches(b"abcd", [1, 2], [BASE + 1, BASE + 2], [0, 0])
    with pytest.raises(ValueError, match="does not fit"):
        segment.append_batches(b"ab", [1, 1], [BASE - 1, BASE + 2], [0, 0])
    assert segment.size_bytes == 0


# -- record_count ----------------------------------------------------------------------------------------

# Each step: append a batch of n records (n ≥ 1), ask the count (0), or truncate to a batch boundary (-k:
# drop the last k batches).
steps = st.lists(st.integers(-3, 6), min_size=1, max_size=30)


def append(segment: LogSegment, next_offset: int, records: int) -> int:
    batch = encode_batch(
        [Record(next_offset + i, 1_000, b"k%d" % i, b"v") for i in range(records)], base_offset=next_offset
    )
    last = next_offset + records - 1
    segment.append(batch, largest_offset=last, max_timestamp=1_000, offset_of_max_timestamp=last)
    return len(batch)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=steps)
def test_the_count_follows_appends_and_truncations(
    tmp_path_factory: pytest.TempPathFactory, spec: list[int]
) -> None:
    directory: Path = tmp_path_factory.mktemp("segment")
    segment = LogSegment.create(directory, 0, config=LogConfig(), now_ms=0)
    batches: list[tuple[int, int]] = []  # (bytes, records) of each batch in the file
    next_offset = 0
    try:
        for step in spec:
            if step > 0:
                batches.append((append(segment, next_offset, step), step))
                next_offset += step
            elif step < 0 and batches:
                del batches[step:]
                segment.truncate_to_position(sum(size for size, _ in batches))
                next_offset = sum(records for _, records in batches)
            assert segment.record_count() == sum(records for _, records in batches)
    finally:
        segment.close()


LISTED_LENGTHS = [None, -1, 0, 7, 8, 12, 24, 36]


@pytest.mark.parametrize("time_index_length", LISTED_LENGTHS)
@pytest.mark.parametrize("index_length", LISTED_LENGTHS)
def test_index_files_checked_from_listed_lengths_as_from_the_files(
    tmp_path: Path, index_length: int | None, time_index_length: int | None
) -> None:
    """``check_index_files`` with the lengths a listing gave raises what it raises from the files of those
    lengths (None: no file; -1: its stat failed, so the file is read), and passes where they pass."""
    segment = LogSegment.create(tmp_path, 0, config=LogConfig(), now_ms=0)
    segment.close()
    for suffix, length in ((".index", index_length), (".timeindex", time_index_length)):
        path = tmp_path / f"{0:020d}{suffix}"
        path.unlink(missing_ok=True)
        if length is not None:
            path.write_bytes(bytes(max(length, 0)))

    def outcome(listed: tuple[int | None, int | None] | None) -> str:
        loaded = LogSegment(tmp_path, 0, config=LogConfig(), created_ms=0)
        try:
            loaded.check_index_files(has_txn_index=False, listed_lengths=listed)
        except (FileNotFoundError, CorruptDataError) as exc:
            return f"{type(exc).__name__}: {exc}"
        return "ok"

    from_files = outcome(None)
    assert outcome((index_length, time_index_length)) == from_files
    whole_offsets = index_length in {-1, 0, 8, 24}  # -1: a file of 0 bytes, read after the failed stat
    whole_times = time_index_length in {None, -1, 0, 12, 24, 36}  # no time index is allowed
    assert (from_files == "ok") == (whole_offsets and whole_times)

"""``iter_file_batches``: the batches of a ``.log`` between two positions, read in chunks (Kafka
``FileRecords``): the same batches whatever the chunk size (a batch across chunks is read whole), from the
file or from bytes the caller read already, and a torn or corrupt batch reported with the path and its
position (CRC checked unless told not to)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.base.errors import CorruptDataError
from service.storage.file_records import CHUNK_BYTES, iter_file_batches
from service.storage.records import LOG_OVERHEAD, Record, RecordBatch, encode_batch

BATCHES = [
    encode_batch([Record(i, 1000 + i, b"k%d" % i, b"v" * (i * 7 % 50)) for i in range(base, base + n)])
    for base, n in ((0, 1), (1, 3), (4, 1), (5, 5), (10, 2))
]
DATA = b"".join(BATCHES)
POSITIONS = [sum(len(b) for b in BATCHES[:i]) for i in range(len(BATCHES))]


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(DATA)
    return path


def read(
    path: Path,
    start: int = 0,
    end: int = len(DATA),
    *,
    chunk_bytes: int = CHUNK_BYTES,
    verify_crc: bool = True,
) -> list[RecordBatch]:
    fd = os.open(path, os.O_RDONLY)
    try:
        return list(
            iter_file_batches(fd, start, end, path=str(path), chunk_bytes=chunk_bytes, verify_crc=verify_crc)
        )
    finally:
        os.close(fd)


def test_every_batch_in_order_with_its_file_position(log_file: Path) -> None:
    batches = read(log_file)
    assert [b.data for b in batches] == BATCHES
    assert [b.position for b in batches] == POSITIONS
    assert [b.base_offset for b in batches] == [0, 1, 4, 5, 10]


@settings(max_examples=40, deadline=None)
@given(st.integers(LOG_OVERHEAD, len(DATA) + 10))
def test_the_chunk_size_changes_nothing(tmp_path_factory: pytest.TempPathFactory, chunk_bytes: int) -> None:
    """Chunks smaller than a batch, or cutting batches anywhere: the same batches. (Not below the log
    overhead: a chunk must hold a batch's length field; every caller reads 4 MiB chunks.)"""
    path = tmp_path_factory.mktemp("chunks") / "0.log"
    path.write_bytes(DATA)
    assert [b.data for b in read(path, chunk_bytes=chunk_bytes)] == BATCHES


def test_a_range_from_a_batch_boundary(log_file: Path) -> None:
    batches = read(log_file, POSITIONS[2], POSITIONS[4])
    assert [b.base_offset for b in batches] == [4, 5]
    assert read(log_file, POSITIONS[3], POSITIONS[3]) == []


def test_bytes_read_already_give_the_same_batches_without_a_read() -> None:
    batches = list(
        iter_file_batches(None, POSITIONS[1], len(DATA), path="x.log", preread=DATA[POSITIONS[1] :])
    )
    assert [b.data for b in batches] == BATCHES[1:]
    assert [b.position for b in batches] == POSITIONS[1:]


def test_a_torn_tail_shorter_than_the_log_overhead_is_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    path.write_bytes(DATA + b"\x00" * (LOG_OVERHEAD - 1))
    with pytest.raises(CorruptDataError, match="incomplete batch") as info:
        read(path, end=len(DATA) + LOG_OVERHEAD - 1)
    assert (info.value.path, info.value.position) == (str(path), len(DATA))


def test_a_batch_that_does_not_fit_before_the_end_is_corrupt(log_file: Path) -> None:
    """A batch cut by the range's end (a crash mid-append) is reported where it starts, never read past
    the end."""
    end = POSITIONS[4] + len(BATCHES[4]) // 2
    got: list[int] = []
    with pytest.raises(CorruptDataError) as info:
        fd = os.open(log_file, os.O_RDONLY)
        try:
            for batch in iter_file_batches(fd, 0, end, path=str(log_file)):
                got.append(batch.base_offset)
        finally:
            os.close(fd)
    assert got == [0, 1, 4, 5], "the batches before it are given first"
    assert (info.value.path, info.value.position) == (str(log_file), POSITIONS[4])


def test_a_bad_crc_is_found_unless_not_checked(tmp_path: Path) -> None:
    corrupt = bytearray(DATA)
    corrupt[POSITIONS[3] + len(BATCHES[3]) - 1] ^= 0xFF
    path = tmp_path / "0.log"
    path.write_bytes(bytes(corrupt))
    with pytest.raises(CorruptDataError, match="CRC") as info:
        read(path)
    assert info.value.position == POSITIONS[3]
    assert len(read(path, verify_crc=False)) == len(BATCHES)

"""Segment files a real Kafka broker wrote (tests/fixtures/kafka-written) decode to what their README lists.

Every byte the CRC covers, flipped, gives a CorruptDataError naming the batch's position in the file.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest

from service.base.errors import CorruptDataError
from service.storage.compression import CompressionType
from service.storage.records import RecordBatch, TimestampType, iter_batches
from tests.paths import FIXTURES


@dataclass(frozen=True)
class ExpectedBatch:
    base_offset: int
    records: tuple[tuple[int, int], ...]  # (offset, value size in bytes)


@dataclass(frozen=True)
class ExpectedFile:
    size_bytes: int
    batches: tuple[ExpectedBatch, ...]


# The table in tests/fixtures/README.md.
EXPECTED = {
    "kraft-metadata-a.log": ExpectedFile(
        331,
        (ExpectedBatch(0, ((0, 23),)), ExpectedBatch(1, ((1, 24), (2, 65), (3, 65)))),
    ),
    "kraft-metadata-b.log": ExpectedFile(
        258,
        (ExpectedBatch(1, ((1, 23),)), ExpectedBatch(2, ((2, 25), (3, 65)))),
    ),
}
fixture_files = pytest.mark.parametrize("name", sorted(EXPECTED))


def kafka_written_dir() -> Path:
    """tests/fixtures/kafka-written in this repository; fail (never skip) when it is missing."""
    directory = FIXTURES
    if not directory.is_dir():
        pytest.fail(f"Kafka-written fixtures not found at {directory}: restore them, do not skip these tests")
    missing = sorted(name for name in EXPECTED if not (directory / name).is_file())
    if missing:
        pytest.fail(f"Kafka-written fixtures missing from {directory}: {', '.join(missing)}")
    return directory


def read_fixture(name: str) -> bytes:
    return (kafka_written_dir() / name).read_bytes()


@fixture_files
def test_fixture_decodes_to_what_the_readme_lists(name: str) -> None:
    data = read_fixture(name)
    expected = EXPECTED[name]
    assert len(data) == expected.size_bytes

    batches = list(iter_batches(data))
    assert [b.base_offset for b in batches] == [b.base_offset for b in expected.batches]
    position = 0
    for batch, expected_batch in zip(batches, expected.batches, strict=True):
        assert batch.position == position
        assert batch.magic == 2
        assert batch.is_crc_valid()
        assert batch.compression is CompressionType.NONE
        assert batch.timestamp_type is TimestampType.CREATE_TIME
        assert not batch.is_control
        assert not batch.is_transactional
        assert not batch.has_delete_horizon
        assert batch.records_count == len(expected_batch.records)
        assert batch.last_offset == expected_batch.records[-1][0]
        records = batch.records()
        assert [(r.offset, len(r.value or b"")) for r in records] == list(expected_batch.records)
        assert all(r.key is None for r in records)
        assert all(r.value is not None for r in records)
        assert all(batch.base_timestamp <= r.timestamp <= batch.max_timestamp for r in records)
        position += batch.size_bytes
    assert position == len(data)


def test_fixtures_are_consecutive_offsets_without_gaps() -> None:
    for name in EXPECTED:
        batches = list(iter_batches(read_fixture(name)))
        for previous, following in itertools.pairwise(batches):
            assert following.base_offset == previous.next_offset


def _crc_covered_positions(batches: list[RecordBatch]) -> list[tuple[RecordBatch, int]]:
    """(batch, file position) for every byte from each batch's attributes field (batch pos 21) to its end."""
    return [(b, p) for b in batches for p in range(b.position + 21, b.position + b.size_bytes)]


@fixture_files
def test_flipping_any_crc_covered_byte_is_corruption_at_the_batch(name: str) -> None:
    data = read_fixture(name)
    batches = list(iter_batches(data))
    covered = _crc_covered_positions(batches)
    assert len(covered) == len(data) - 21 * len(batches)
    for batch, position in covered:
        for mask in (0x01, 0xFF):
            flipped = bytearray(data)
            flipped[position] ^= mask
            decoded: list[RecordBatch] = []
            with pytest.raises(CorruptDataError, match="CRC mismatch") as caught:
                decoded.extend(iter_batches(bytes(flipped), base_position=0))
            # Batches before the flipped one still decode, the error names where the bad one starts.
            assert [b.position for b in decoded] == [
                b.position for b in batches if b.position < batch.position
            ]
            assert caught.value.position == batch.position, position
            assert f"position {batch.position}" in str(caught.value)


def test_error_can_be_located_in_the_fixture_file() -> None:
    path = kafka_written_dir() / "kraft-metadata-a.log"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    with pytest.raises(CorruptDataError) as caught:
        list(iter_batches(bytes(data)))
    located = caught.value.at(path=str(path))
    assert located.path == str(path)
    assert located.position == 91
    assert str(located).startswith(f"{path}, position 91: CRC mismatch")

"""The producer-state snapshot codec: Kafka's version-1 layout, round trips, and every kind of bad file."""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.base.errors import CorruptDataError
from service.storage.producer_snapshot import (
    ENTRY_SIZE,
    HEADER_SIZE,
    ProducerSnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    list_snapshot_offsets,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)

INT16 = st.integers(-(1 << 15), (1 << 15) - 1)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
ENTRIES = st.lists(st.builds(ProducerSnapshotEntry, INT64, INT16, INT32, INT64, INT32, INT64, INT32, INT64))

ENTRY = ProducerSnapshotEntry(
    producer_id=7,
    producer_epoch=2,
    last_sequence=9,
    last_offset=41,
    offset_delta=4,
    timestamp=1_700_000_000_000,
    coordinator_epoch=3,
    current_txn_first_offset=37,
)


def kafka_bytes(*rows: tuple[int, ...]) -> bytes:
    """A snapshot built field by field from the layout Kafka documents, independently of the encoder."""
    body = struct.pack(">i", len(rows)) + b"".join(struct.pack(">qhiqiqiq", *row) for row in rows)
    return struct.pack(">hI", 1, crc32c.crc32c(body)) + body


def test_layout_is_kafkas_version_1() -> None:
    row = (7, 2, 9, 41, 4, 1_700_000_000_000, 3, 37)
    assert (HEADER_SIZE, ENTRY_SIZE) == (10, 46)
    assert encode_snapshot([ENTRY]) == kafka_bytes(row)
    assert len(encode_snapshot([ENTRY])) == 56  # what a broker writes for one producer
    assert decode_snapshot(kafka_bytes(row)) == [ENTRY]


def test_an_empty_snapshot_is_ten_bytes() -> None:
    assert decode_snapshot(encode_snapshot([])) == []
    assert len(encode_snapshot([])) == 10


@given(ENTRIES)
def test_round_trip(entries: list[ProducerSnapshotEntry]) -> None:
    assert decode_snapshot(encode_snapshot(entries)) == entries


@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_corrupt_data(data: bytes) -> None:
    with contextlib.suppress(CorruptDataError):
        decode_snapshot(data)


def test_bad_crc_names_the_file_and_position() -> None:
    data = bytearray(encode_snapshot([ENTRY]))
    data[20] ^= 1
    with pytest.raises(CorruptDataError, match=r"0007\.snapshot, position 2: .*CRC mismatch") as err:
        decode_snapshot(bytes(data), path="/d/00000000000000000007.snapshot")
    assert err.value.path == "/d/00000000000000000007.snapshot"


def test_unknown_version_is_rejected() -> None:
    data = bytearray(encode_snapshot([ENTRY]))
    data[1] = 2
    with pytest.raises(CorruptDataError, match="version 2 is not supported; only version 1"):
        decode_snapshot(bytes(data), path="x.snapshot")


def test_count_that_does_not_match_the_length_is_rejected() -> None:
    body = struct.pack(">i", 2) + struct.pack(">qhiqiqiq", 1, 0, 0, 0, 0, 0, 0, -1)
    data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    with pytest.raises(CorruptDataError, match="says 2 entries"):
        decode_snapshot(data)


def test_short_file_is_rejected() -> None:
    with pytest.raises(CorruptDataError, match="shorter than its 10-byte header"):
        decode_snapshot(b"\x00\x01")


def test_files_on_disk(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, 42, [ENTRY])
    assert path == snapshot_path(tmp_path, 42)
    assert path.name == "00000000000000000042.snapshot"
    (tmp_path / "00000000000000000007.snapshot.deleted").write_bytes(b"")
    write_snapshot(tmp_path, 3, [])
    assert list_snapshot_offsets(tmp_path) == [3, 42]
    assert read_snapshot(path) == [ENTRY]
    assert not list(tmp_path.glob("*.tmp"))

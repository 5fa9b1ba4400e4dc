"""The leader-epoch-checkpoint codec: Kafka's text checkpoint, version 0, two fields a line."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.base.errors import CorruptDataError
from service.storage.leader_epoch_checkpoint import (
    EpochEntry,
    decode_leader_epoch_checkpoint,
    encode_leader_epoch_checkpoint,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)

ENTRIES = st.lists(
    st.builds(EpochEntry, st.integers(-(1 << 31), (1 << 31) - 1), st.integers(-(1 << 63), (1 << 63) - 1))
)


def test_written_as_a_broker_writes_it() -> None:
    assert encode_leader_epoch_checkpoint([EpochEntry(0, 0), EpochEntry(1, 90)]) == b"0\n2\n0 0\n1 90\n"
    assert encode_leader_epoch_checkpoint([]) == b"0\n0\n"


def test_read_as_kafka_reads_it() -> None:
    assert decode_leader_epoch_checkpoint(b"0\r\n2\r\n0  0\n1\t90  \n") == [
        EpochEntry(0, 0),
        EpochEntry(1, 90),
    ]
    assert decode_leader_epoch_checkpoint(b"") == []
    assert decode_leader_epoch_checkpoint(b"0\n") == []


@given(ENTRIES)
def test_round_trip(entries: list[EpochEntry]) -> None:
    assert decode_leader_epoch_checkpoint(encode_leader_epoch_checkpoint(entries)) == entries


@given(st.binary(max_size=100))
def test_arbitrary_bytes_raise_only_corrupt_data(data: bytes) -> None:
    with contextlib.suppress(CorruptDataError):
        decode_leader_epoch_checkpoint(data)


@pytest.mark.parametrize(
    ("data", "message", "position"),
    [
        (b"1\n0\n", "version 1 is not supported", 0),
        (b"0\n2\n0 0\n", "line 2 says 2 entries but the file has 1", 2),
        (b"0\n1\n0 0 5\n", "line 3: expected '<epoch> <start offset>'", 4),
        (b"0\n1\nx 5\n", "line 3", 4),
        (b"0\nx\n", "line 2: the entry count must be an integer", 2),
    ],
)
def test_bad_files_name_the_line_and_position(data: bytes, message: str, position: int) -> None:
    with pytest.raises(CorruptDataError, match=message) as err:
        decode_leader_epoch_checkpoint(data, path="/p/leader-epoch-checkpoint")
    assert err.value.position == position
    assert "leader-epoch-checkpoint" in str(err.value)


def test_file_on_disk(tmp_path: Path) -> None:
    assert read_leader_epoch_checkpoint(tmp_path) is None
    write_leader_epoch_checkpoint(tmp_path, [EpochEntry(3, 10)])
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n3 10\n"
    assert read_leader_epoch_checkpoint(tmp_path) == [EpochEntry(3, 10)]

"""The partition.metadata codec: Kafka's two lines and its base64 topic ids."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.base.errors import CorruptDataError
from service.storage.partition_metadata import (
    PartitionMetadata,
    decode_partition_metadata,
    decode_topic_id,
    encode_partition_metadata,
    encode_topic_id,
    new_topic_id,
    read_partition_metadata,
    write_partition_metadata,
)


def test_topic_id_is_kafkas_uuid_string() -> None:
    # Kafka's Uuid(mostSignificantBits, leastSignificantBits): both longs big-endian, then base64url.
    raw = (0x1).to_bytes(8, "big") + (0x2).to_bytes(8, "big")
    assert encode_topic_id(raw) == "AAAAAAAAAAEAAAAAAAAAAg"
    assert encode_topic_id(bytes(16)) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert decode_topic_id("AAAAAAAAAAEAAAAAAAAAAg") == raw


def test_new_topic_ids_are_random_22_character_ids() -> None:
    ids = {new_topic_id() for _ in range(50)}
    assert len(ids) == 50
    for topic_id in ids:
        assert len(topic_id) == 22 and not topic_id.startswith("-")
        assert uuid.UUID(bytes=decode_topic_id(topic_id)).version == 4


def test_written_as_a_broker_writes_it() -> None:
    data = encode_partition_metadata(PartitionMetadata(0, "AAAAAAAAAAEAAAAAAAAAAg"))
    assert data == b"version: 0\ntopic_id: AAAAAAAAAAEAAAAAAAAAAg"
    assert len(data) == 43  # the size of a broker's file


@given(st.binary(min_size=16, max_size=16))
def test_round_trip(raw: bytes) -> None:
    metadata = PartitionMetadata(0, encode_topic_id(raw))
    assert decode_partition_metadata(encode_partition_metadata(metadata)) == metadata


@given(st.binary(max_size=80))
def test_arbitrary_bytes_raise_only_corrupt_data(data: bytes) -> None:
    with contextlib.suppress(CorruptDataError):
        decode_partition_metadata(data)


def test_a_trailing_newline_and_extra_spaces_are_accepted() -> None:
    parsed = decode_partition_metadata(b"version:  0\r\ntopic_id:\tAAAAAAAAAAEAAAAAAAAAAg\n")
    assert parsed.topic_id == "AAAAAAAAAAEAAAAAAAAAAg"


@pytest.mark.parametrize(
    ("data", "message", "position"),
    [
        (b"version: 1\ntopic_id: AAAAAAAAAAEAAAAAAAAAAg", "version 1 is not supported", 0),
        (b"versio: 0\ntopic_id: AAAAAAAAAAEAAAAAAAAAAg", "line 1: expected 'version: <n>'", 0),
        (b"version: 0\n", "line 2: expected 'topic_id: <base64 id>'", 11),
        (b"version: 0\ntopic_id: AAAA", "line 2: topic id 'AAAA' decodes to 3 bytes", 11),
    ],
)
def test_malformed_files_name_the_file_and_position(data: bytes, message: str, position: int) -> None:
    with pytest.raises(CorruptDataError, match=message) as err:
        decode_partition_metadata(data, path="/d/t-0/partition.metadata")
    assert err.value.position == position
    assert str(err.value).startswith("/d/t-0/partition.metadata, position")


def test_file_on_disk(tmp_path: Path) -> None:
    assert read_partition_metadata(tmp_path) is None
    written = write_partition_metadata(tmp_path, "AAAAAAAAAAEAAAAAAAAAAg")
    assert read_partition_metadata(tmp_path) == written

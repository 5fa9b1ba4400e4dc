"""Offset checkpoint files, byte for byte as Kafka has them (cf. Kafka's ``OffsetCheckpointFileTest``)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.checkpoints import (
    OffsetCheckpointFile,
    decode_checkpoint,
    encode_checkpoint,
)
from service.storage.log_files import RECOVERY_POINT_CHECKPOINT
from service.storage.topic_partition import TopicPartition

FOO_1 = TopicPartition("foo", 1)
BAR_2 = TopicPartition("bar", 2)

topics = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", min_size=1, max_size=249
).filter(lambda t: t not in (".", ".."))
topic_partitions = st.builds(TopicPartition, topics, st.integers(0, 2**31 - 1))
offsets = st.integers(-(2**63), 2**63 - 1)
checkpoint_maps = st.dictionaries(topic_partitions, offsets, max_size=20)


@pytest.fixture
def checkpoint(tmp_path: Path) -> OffsetCheckpointFile:
    return OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT)


# --- round trips and the file ---------------------------------------------------------------------------


def test_write_then_read(checkpoint: OffsetCheckpointFile) -> None:
    checkpoint.write({FOO_1: 5, BAR_2: 10})

    assert checkpoint.read() == {FOO_1: 5, BAR_2: 10}


def test_overwrite_reads_only_the_new_map(checkpoint: OffsetCheckpointFile) -> None:
    checkpoint.write({FOO_1: 5, BAR_2: 10})
    checkpoint.write({TopicPartition("baz", 0): 7})

    assert checkpoint.read() == {TopicPartition("baz", 0): 7}


def test_on_disk_lines(checkpoint: OffsetCheckpointFile) -> None:
    checkpoint.write({FOO_1: 5, BAR_2: 10})

    lines = checkpoint.path.read_bytes().split(b"\n")
    assert lines[:2] == [b"0", b"2"]
    assert sorted(lines[2:4]) == [b"bar 2 10", b"foo 1 5"]
    assert lines[4:] == [b""]  # every line, the last included, ends in \n


def test_encoding_is_sorted_and_deterministic() -> None:
    assert encode_checkpoint({FOO_1: 5, BAR_2: 10}) == b"0\n2\nbar 2 10\nfoo 1 5\n"
    assert encode_checkpoint({BAR_2: 10, FOO_1: 5}) == encode_checkpoint({FOO_1: 5, BAR_2: 10})


def test_many_entries_round_trip(checkpoint: OffsetCheckpointFile) -> None:
    entries = {TopicPartition(f"topic-{t}", p): t * 1000 + p for t in range(20) for p in range(50)}

    checkpoint.write(entries)

    assert checkpoint.read() == entries


def test_empty_file_reads_empty(checkpoint: OffsetCheckpointFile) -> None:
    checkpoint.path.write_bytes(b"")

    assert checkpoint.read() == {}


def test_empty_map_round_trips(checkpoint: OffsetCheckpointFile) -> None:
    checkpoint.write({})

    assert checkpoint.path.read_bytes() == b"0\n0\n"
    assert checkpoint.read() == {}


def test_version_1_fails(checkpoint: OffsetCheckpointFile) -> None:
    checkpoint.path.write_bytes(b"1\n2\nfoo 1 5\nbar 2 10\n")

    with pytest.raises(CorruptDataError, match="version 1") as info:
        checkpoint.read()
    assert info.value.path == str(checkpoint.path)
    assert info.value.position == 0
    assert str(checkpoint.path) in str(info.value)


def test_missing_file_reads_empty(checkpoint: OffsetCheckpointFile) -> None:
    assert not checkpoint.path.exists()
    assert checkpoint.read() == {}


def test_write_leaves_no_tmp(checkpoint: OffsetCheckpointFile) -> None:
    checkpoint.write({FOO_1: 5})

    assert [p.name for p in checkpoint.path.parent.iterdir()] == [RECOVERY_POINT_CHECKPOINT]


# --- reading rules -------------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"0", b"0\n", b"0\r\n"])
def test_only_a_version_line_reads_empty(data: bytes) -> None:
    assert decode_checkpoint(data) == {}


@pytest.mark.parametrize(
    "data",
    [
        b"0\n2\nfoo\t1\t5\nbar   2  10\n",  # tabs and runs of spaces
        b"0\n2\nfoo 1 5 \nbar 2 10\t\n",  # trailing whitespace
        b"0\r\n2\r\nfoo 1 5\r\nbar 2 10\r\n",  # CRLF line ends
        b"0\n2\nfoo 1 5\nbar 2 10",  # no final line end
        b"0\n2\nfoo \x0c1\x0b 5\nbar 2 10\n",  # form feed, vertical tab: Java's \s
    ],
)
def test_whitespace_tolerated_on_read(data: bytes) -> None:
    assert decode_checkpoint(data) == {FOO_1: 5, BAR_2: 10}


def test_signs_and_extremes_read_as_kafka_does() -> None:
    data = b"0\n+2\nfoo +1 -1\nbar 2147483647 9223372036854775807\n"

    assert decode_checkpoint(data) == {FOO_1: -1, TopicPartition("bar", 2**31 - 1): 2**63 - 1}


def test_repeated_partition_keeps_last_offset() -> None:
    assert decode_checkpoint(b"0\n2\nfoo 1 5\nfoo 1 6\n") == {FOO_1: 6}


@pytest.mark.parametrize(
    ("data", "line", "position"),
    [
        (b"x\n", "line 1", 0),
        (b" 0\n", "line 1", 0),
        (b"0 \n0\n", "line 1", 0),
        (b"\n", "line 1", 0),
        (b"0\ntwo\n", "line 2", 2),
        (b"0\n1\nfoo 1\n", "line 3", 4),
        (b"0\n1\nfoo 1 5 6\n", "line 3", 4),
        (b"0\n1\n foo 1 5\n", "line 3", 4),  # leading whitespace makes an empty first field in Kafka
        (b"0\n2\nfoo 1 5\n\n", "line 4", 12),  # an empty line is a malformed entry
        (b"0\n1\nfoo one 5\n", "line 3", 4),
        (b"0\n1\nfoo 1 5x\n", "line 3", 4),
        (b"0\n1\nfoo 1 5.0\n", "line 3", 4),
        (b"0\n1\nfoo 1 1_000\n", "line 3", 4),
        (b"0\n1\nfoo 2147483648 5\n", "line 3", 4),
        (b"0\n1\nfoo 1 9223372036854775808\n", "line 3", 4),
        (b"0\n1\nfoo 1 \xd9\xa3\n", "line 3", 4),  # a non-ASCII digit
        (b"0\n3\nfoo 1 5\nbar 2 10\n", "line 2 says 3 entries", 21),
        (b"0\n1\nfoo 1 5\nbar 2 10\n", "line 2 says 1 entries", 12),
        (b"0\n-1\n", "line 2 says -1 entries", 5),
    ],
)
def test_malformed_files_fail_with_line_and_position(data: bytes, line: str, position: int) -> None:
    with pytest.raises(CorruptDataError, match=line) as info:
        decode_checkpoint(data, path="/logs/cleaner-offset-checkpoint")
    assert info.value.path == "/logs/cleaner-offset-checkpoint"
    assert info.value.position == position
    assert str(info.value).startswith(f"/logs/cleaner-offset-checkpoint, position {position}: ")


def test_invalid_utf8_fails() -> None:
    with pytest.raises(CorruptDataError, match="line 3 is not valid UTF-8") as info:
        decode_checkpoint(b"0\n1\nfo\xff 1 5\n", path="p")
    assert info.value.position == 6


def test_corrupt_file_names_the_path(checkpoint: OffsetCheckpointFile) -> None:
    checkpoint.path.write_bytes(b"0\n1\ngarbage\n")

    with pytest.raises(CorruptDataError, match=RECOVERY_POINT_CHECKPOINT):
        checkpoint.read()


# --- writing rules -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        TopicPartition("has space", 0),
        TopicPartition("new\nline", 0),
        TopicPartition("foo\n", 0),
        TopicPartition("", 0),
        TopicPartition(".", 0),
        TopicPartition("..", 0),
        TopicPartition("a" * 250, 0),
        TopicPartition("slash/topic", 0),
        TopicPartition("foo", -1),
        TopicPartition("foo", 2**31),
        TopicPartition("foo", True),
    ],
)
def test_unwritable_keys_are_invalid_input(checkpoint: OffsetCheckpointFile, key: TopicPartition) -> None:
    with pytest.raises(InvalidInputError):
        checkpoint.write({key: 1})
    assert not checkpoint.path.exists()  # nothing written


@pytest.mark.parametrize("offset", [2**63, -(2**63) - 1, True])
def test_unwritable_offsets_are_invalid_input(offset: int) -> None:
    with pytest.raises(InvalidInputError):
        encode_checkpoint({FOO_1: offset})


# --- properties ----------------------------------------------------------------------------------------


@given(checkpoint_maps)
def test_round_trip(entries: dict[TopicPartition, int]) -> None:
    assert decode_checkpoint(encode_checkpoint(entries)) == entries


@given(checkpoint_maps)
def test_encoding_ignores_insertion_order(entries: dict[TopicPartition, int]) -> None:
    reversed_entries = dict(reversed(list(entries.items())))
    assert encode_checkpoint(reversed_entries) == encode_checkpoint(entries)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_corrupt_data_error(data: bytes) -> None:
    with contextlib.suppress(CorruptDataError):
        decode_checkpoint(data)


@given(checkpoint_maps, st.data())
def test_mutated_files_raise_only_corrupt_data_error(
    entries: dict[TopicPartition, int], data: st.DataObject
) -> None:
    encoded = bytearray(encode_checkpoint(entries))
    index = data.draw(st.integers(0, len(encoded) - 1))
    encoded[index] = data.draw(st.integers(0, 255))
    with contextlib.suppress(CorruptDataError):
        decode_checkpoint(bytes(encoded))


# --- TopicPartition ------------------------------------------------------------------------------------


def test_topic_partition_str_and_order() -> None:
    assert str(TopicPartition("my-topic", 3)) == "my-topic-3"
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 10), TopicPartition("a", 2)]) == [
        TopicPartition("a", 2),
        TopicPartition("a", 10),
        TopicPartition("b", 0),
    ]


@given(checkpoint_maps, st.sampled_from([b"", b"x 1 2\n", b"a 2147483648 0\n", b"a 1 9223372036854775808\n"]))
def test_writers_shape_reads_as_line_by_line(entries: dict[TopicPartition, int], extra: bytes) -> None:
    """A file of the writers' shape is read by one expression; it gives the map the line-by-line reading
    gives, and any file it declines (a count off by one, numbers out of range) still fails as before."""
    data = encode_checkpoint(entries)
    lines = data.split(b"\n", 2)
    data_with_extra = (
        b"\n".join([lines[0], str(len(entries) + (1 if extra else 0)).encode(), lines[2]]) + extra
    )
    if extra in (b"", b"x 1 2\n"):
        expected = dict(entries)
        if extra:
            expected.pop(TopicPartition("x", 1), None)
            expected[TopicPartition("x", 1)] = 2
        assert decode_checkpoint(data_with_extra) == expected
    else:
        with pytest.raises(CorruptDataError, match="line"):
            decode_checkpoint(data_with_extra)

"""File and directory names of Kafka's on-disk layout (``LogFileUtils``, ``parseTopicPartitionName``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.base.errors import InvalidInputError
from service.storage.log_files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    OFFSET_WIDTH,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    PartitionDirName,
    base_offset_from_name,
    file_name,
    is_valid_topic_name,
    parse_partition_dir_name,
    partition_dir_name,
)

UUID = "0123456789abcdef0123456789abcdef"


# --- parse_partition_dir_name --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("foo-0", PartitionDirName("foo", 0, "")),
        ("my-topic-3", PartitionDirName("my-topic", 3, "")),
        ("a-b-c-12", PartitionDirName("a-b-c", 12, "")),
        ("my.topic_x-7", PartitionDirName("my.topic_x", 7, "")),
        ("__consumer_offsets-49", PartitionDirName("__consumer_offsets", 49, "")),
        (f"foo-1.{UUID}-delete", PartitionDirName("foo", 1, "delete")),
        (f"my-topic-3.{UUID}-delete", PartitionDirName("my-topic", 3, "delete")),
        (f"my.topic-3.{UUID}-delete", PartitionDirName("my.topic", 3, "delete")),  # only the last '.' goes
        (f"foo-2.{UUID}-future", PartitionDirName("foo", 2, "future")),
        (f"foo-4.{UUID}-stray", PartitionDirName("foo", 4, "stray")),
        ("foo-2147483647", PartitionDirName("foo", 2**31 - 1, "")),
    ],
)
def test_parse_partition_dir_name(name: str, expected: PartitionDirName) -> None:
    assert parse_partition_dir_name(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        "foo",  # no dash
        "",
        "-3",  # empty topic
        "foo-",  # empty partition
        "foo-x",  # partition not an int
        "foo-1a",
        "foo-1.5",
        "foo-²",  # str.isdigit() accepts this, int() does not
        "foo-delete",  # -delete without '.<uuid>'
        "foo-3-delete",
        f"foo.{UUID}-delete",  # no partition before the uuid
        f"foo-x.{UUID}-future",
    ],
)
def test_parse_partition_dir_name_rejects(name: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_partition_dir_name(name)


def test_parse_splits_at_the_last_dash() -> None:
    """As Kafka: ``foo--1`` is topic ``foo-``, partition 1 (a negative partition cannot be spelled)."""
    assert parse_partition_dir_name("foo--1") == PartitionDirName("foo-", 1, "")


def test_parse_error_names_the_dir() -> None:
    with pytest.raises(InvalidInputError, match="'foo-x'"):
        parse_partition_dir_name("foo-x")


topics = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=249).filter(
    is_valid_topic_name
)


@given(topics, st.integers(0, 2**31 - 1))
def test_partition_dir_name_round_trip(topic: str, partition: int) -> None:
    assert parse_partition_dir_name(partition_dir_name(topic, partition)) == PartitionDirName(
        topic, partition, ""
    )


@given(topics, st.integers(0, 2**31 - 1), st.sampled_from(["delete", "future", "stray"]))
def test_transient_dir_name_round_trip(topic: str, partition: int, kind: str) -> None:
    name = f"{partition_dir_name(topic, partition)}.{UUID}-{kind}"
    assert parse_partition_dir_name(name) == PartitionDirName(topic, partition, kind)


# --- is_valid_topic_name -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "topic",
    ["foo", "my-topic", "a.b_c-D9", "__consumer_offsets", "...", ".a", "a" * 249, "_", "-"],
)
def test_valid_topic_names(topic: str) -> None:
    assert is_valid_topic_name(topic)


@pytest.mark.parametrize(
    "topic",
    [
        "",
        ".",
        "..",
        "a" * 250,
        "foo/bar",
        "foo bar",
        "foo\tbar",
        "foo\n",
        "\nfoo",
        "tópico",
        "foo:bar",
        "a+b",
    ],
)
def test_invalid_topic_names(topic: str) -> None:
    assert not is_valid_topic_name(topic)


# --- file_name / base_offset_from_name -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("base_offset", "suffix", "expected"),
    [
        (0, LOG_SUFFIX, "00000000000000000000.log"),
        (42, INDEX_SUFFIX, "00000000000000000042.index"),
        (1234567890, TIME_INDEX_SUFFIX, "00000000001234567890.timeindex"),
        (2**63 - 1, LOG_SUFFIX, "09223372036854775807.log"),
        (7, LOG_SUFFIX + SWAP_SUFFIX, "00000000000000000007.log.swap"),
    ],
)
def test_file_name(base_offset: int, suffix: str, expected: str) -> None:
    assert file_name(base_offset, suffix) == expected
    assert len(expected.split(".", 1)[0]) == OFFSET_WIDTH


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("00000000000000000000.log", 0),
        ("00000000000000000042.index", 42),
        ("00000000000000000042.log.swap", 42),
        ("00000000000000000042.log.cleaned", 42),
        ("00000000000000000099.snapshot", 99),
        ("09223372036854775807.timeindex", 2**63 - 1),
    ],
)
def test_base_offset_from_name(name: str, expected: int) -> None:
    assert base_offset_from_name(name) == expected


@pytest.mark.parametrize(
    "name", ["leader-epoch-checkpoint", "partition.metadata", ".log", "", "abc.log", "-1.log", "²².log"]
)
def test_base_offset_from_name_rejects(name: str) -> None:
    with pytest.raises(InvalidInputError):
        base_offset_from_name(name)


@given(st.integers(0, 2**63 - 1), st.sampled_from([LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, ".txnindex"]))
def test_file_name_round_trip(base_offset: int, suffix: str) -> None:
    assert base_offset_from_name(file_name(base_offset, suffix)) == base_offset


@given(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1))
def test_file_names_sort_as_offsets(a: int, b: int) -> None:
    assert (file_name(a, LOG_SUFFIX) < file_name(b, LOG_SUFFIX)) == (a < b)

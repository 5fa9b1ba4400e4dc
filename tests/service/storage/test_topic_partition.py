"""``TopicPartition``: Kafka's spelling (``my-topic-3``, also the partition's directory name), an order by
topic then partition number (so maps keyed by it are written deterministically: ``t-2`` before ``t-10``),
and a plain frozen value usable as a key."""

from __future__ import annotations

import pytest

from service.storage.topic_partition import TopicPartition


def test_str_is_kafkas_spelling() -> None:
    assert str(TopicPartition("my-topic", 3)) == "my-topic-3"
    assert str(TopicPartition("__consumer_offsets", 49)) == "__consumer_offsets-49"


def test_ordered_by_topic_then_partition_number() -> None:
    tps = [TopicPartition("t", 10), TopicPartition("a", 5), TopicPartition("t", 2), TopicPartition("t-1", 0)]
    assert sorted(tps) == [
        TopicPartition("a", 5),
        TopicPartition("t", 2),
        TopicPartition("t", 10),  # by number, not as text
        TopicPartition("t-1", 0),
    ]


def test_a_frozen_value_usable_as_a_key() -> None:
    offsets = {TopicPartition("t", 0): 5}
    assert offsets[TopicPartition("t", 0)] == 5
    with pytest.raises(AttributeError):
        TopicPartition("t", 0).partition = 1  # type: ignore[misc]  # the point: it is refused
    assert not hasattr(TopicPartition("t", 0), "__dict__")  # nothing else can be set on it either

"""The metadata record codec: Kafka's frames of the kinds logcleaner reads, round trips, and arbitrary bytes
that fail only as CorruptDataError."""

from __future__ import annotations

import contextlib

import hypothesis.strategies as st
import pytest
from hypothesis import given

from service.base.errors import CorruptDataError
from service.metadata.records import (
    CONFIG_RECORD_KEY,
    PARTITION_CHANGE_RECORD_KEY,
    PARTITION_RECORD_KEY,
    REMOVE_TOPIC_RECORD_KEY,
    TOPIC_RECORD_KEY,
    decode_cluster_metadata_record,
    decode_metadata_record,
    encode_metadata_record,
)
from service.storage.partition_metadata import encode_topic_id

# Kafka's bytes, from the fixture segment kraft-metadata-a.log: a TopicRecord and a PartitionRecord v1.
KAFKA_TOPIC_RECORD = bytes.fromhex("0102000473617a0000000000004000800000000000009100")
KAFKA_PARTITION_RECORD = bytes.fromhex(
    "01030100000000000000000000400080000000000000910200000001020000000101010000000100000000000000000210"
    "00000000004000800000000000000100"
)

topic_ids = st.binary(min_size=16, max_size=16).map(encode_topic_id)
names = st.text(min_size=1, max_size=20)
int32s = st.integers(-(2**31), 2**31 - 1)
replica_lists = st.lists(st.integers(0, 2**31 - 1), max_size=5)


def test_kafkas_records_decode_and_encode_to_the_same_bytes() -> None:
    topic = decode_metadata_record(KAFKA_TOPIC_RECORD)
    assert (topic.kind, topic.fields) == (
        "TopicRecord",
        {"name": "saz", "topic_id": "AAAAAAAAQACAAAAAAAAAkQ"},
    )
    partition = decode_metadata_record(KAFKA_PARTITION_RECORD)
    assert partition.kind == "PartitionRecord" and partition.version == 1
    assert partition.fields is not None and partition.fields["replicas"] == [1]
    for raw, record in ((KAFKA_TOPIC_RECORD, topic), (KAFKA_PARTITION_RECORD, partition)):
        assert record.fields is not None
        assert encode_metadata_record(record.api_key, record.version, record.fields) == raw


@given(
    st.one_of(
        st.builds(lambda n, i: (TOPIC_RECORD_KEY, 0, {"name": n, "topic_id": i}), names, topic_ids),
        st.builds(
            lambda p, i, r: (
                PARTITION_RECORD_KEY,
                0,
                {
                    "partition_id": p,
                    "topic_id": i,
                    "replicas": r,
                    "isr": r,
                    "removing_replicas": [],
                    "adding_replicas": [],
                    "leader": -1,
                    "leader_recovery_state": 0,
                    "leader_epoch": 3,
                    "partition_epoch": 4,
                },
            ),
            int32s,
            topic_ids,
            replica_lists,
        ),
        st.builds(
            lambda p, i, r: (
                PARTITION_CHANGE_RECORD_KEY,
                0,
                {
                    "partition_id": p,
                    "topic_id": i,
                    "isr": None,
                    "leader": -2,
                    "replicas": r,
                    "removing_replicas": None,
                    "adding_replicas": None,
                    "leader_recovery_state": -1,
                },
            ),
            int32s,
            topic_ids,
            st.one_of(st.none(), replica_lists),
        ),
        st.builds(
            lambda t, r, n, v: (
                CONFIG_RECORD_KEY,
                0,
                {"resource_type": t, "resource_name": r, "name": n, "value": v},
            ),
            st.sampled_from([2, 4]),
            st.text(max_size=10),
            names,
            st.one_of(st.none(), st.text(max_size=10)),
        ),
        st.builds(lambda i: (REMOVE_TOPIC_RECORD_KEY, 0, {"topic_id": i}), topic_ids),
    )
)
def test_every_record_round_trips(spec: tuple[int, int, dict[str, object]]) -> None:
    api_key, version, fields = spec
    decoded = decode_metadata_record(encode_metadata_record(api_key, version, fields))
    assert (decoded.api_key, decoded.version, decoded.fields) == spec


@given(st.binary(max_size=80))
def test_arbitrary_bytes_fail_only_as_corrupt_data(data: bytes) -> None:
    with contextlib.suppress(CorruptDataError):
        decode_metadata_record(data)
    document = decode_cluster_metadata_record(None, data)  # the dump's decoder never fails
    assert document["key"] is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x02\x00", "frame version 0"),
        (KAFKA_TOPIC_RECORD + b"\x00", r"1 byte\(s\) of garbage after a TopicRecord"),
        (KAFKA_TOPIC_RECORD[:10], "topic_id needs 16 bytes"),
        (bytes([1, 3, 9]) + KAFKA_PARTITION_RECORD[3:], "PartitionRecord version 9"),
    ],
)
def test_malformed_records_say_what_is_wrong(data: bytes, message: str) -> None:
    with pytest.raises(CorruptDataError, match=message):
        decode_metadata_record(data)


def test_an_api_key_kafka_does_not_define_is_named_and_skipped() -> None:
    record = decode_metadata_record(bytes([1, 30, 0]) + b"anything")  # a key a later Kafka may add
    assert (record.kind, record.fields) == ("UnknownRecord(api key 30)", None)

"""Every metadata record kind of Kafka 4.4, each version: Kafka's bytes decode to their fields and encode
back, every message round trips with any value in every field, and bytes after a valid frame header fail
only as CorruptDataError."""

from __future__ import annotations

import contextlib

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from service.base.errors import CorruptDataError
from service.metadata.records import (
    FRAME_VERSION,
    METADATA_RECORD_NAMES,
    decode_cluster_metadata_record,
    decode_metadata_record,
    encode_metadata_record,
)
from service.metadata.schemas import METADATA_SCHEMAS
from service.storage.message_schema import Field, Schema
from service.storage.partition_metadata import encode_topic_id
from tests.service.metadata.kafka_metadata_messages import KAFKA_MESSAGES
from tests.service.metadata.metadata_helpers import sample_fields

NEVER_RELEASED = {6, 13, 16}  # api keys Kafka retired before any release wrote them
EVERY_VERSION = [
    (key, version)
    for key, schema in sorted(METADATA_SCHEMAS.items())
    for version in range(schema.first_version, schema.last_version + 1)
]
# The record of issue 47, as Kafka 4.4 writes it: ClearElrRecord v0 {"topicName":"__transaction_state"}.
KAFKA_CLEAR_ELR = bytes.fromhex("011c00145f5f7472616e73616374696f6e5f737461746500")
_SCALARS: dict[str, st.SearchStrategy[object]] = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "float64": st.floats(allow_nan=False),
    "bool": st.booleans(),
    "uuid": st.binary(min_size=16, max_size=16).map(encode_topic_id),
    "string": st.text(max_size=12),
    "bytes": st.binary(max_size=12),
}


def frame(api_key: int, version: int) -> bytes:
    return bytes([FRAME_VERSION, api_key, version])


def messages(schema: Schema, version: int) -> st.SearchStrategy[dict[str, object]]:
    """Messages of ``schema`` at ``version`` with every field of that version set, null where allowed."""
    return _structs(schema.fields, version)


def _structs(fields: tuple[Field, ...], version: int) -> st.SearchStrategy[dict[str, object]]:
    return st.fixed_dictionaries({f.name: _values(f, version) for f in fields if f.in_version(version)})


def _values(field: Field, version: int) -> st.SearchStrategy[object]:
    one = _structs(field.fields, version) if field.type == "struct" else _SCALARS[field.type]
    values: st.SearchStrategy[object] = st.lists(one, max_size=3) if field.is_array else one
    return st.one_of(st.none(), values) if field.is_nullable(version) else values


def test_every_api_key_kafka_defines_has_a_schema() -> None:
    assert set(METADATA_SCHEMAS) == set(range(30)) - NEVER_RELEASED
    assert METADATA_RECORD_NAMES[28] == "ClearElrRecord"
    assert all(schema.is_flexible(0) for schema in METADATA_SCHEMAS.values())


@pytest.mark.parametrize(("api_key", "version"), EVERY_VERSION)
def test_kafkas_bytes_decode_to_their_fields_and_encode_back(api_key: int, version: int) -> None:
    schema = METADATA_SCHEMAS[api_key]
    value = frame(api_key, version) + bytes.fromhex(KAFKA_MESSAGES[api_key, version])
    record = decode_metadata_record(value)
    assert (record.kind, record.version) == (schema.name, version)
    assert record.fields == sample_fields(schema, version)
    assert encode_metadata_record(api_key, version, record.fields) == value


def test_a_clear_elr_record_dumps_with_its_topic() -> None:
    assert decode_cluster_metadata_record(None, KAFKA_CLEAR_ELR) == {
        "key": None,
        "value": {"kind": "ClearElrRecord", "api_key": 28, "version": 0, "topic_name": "__transaction_state"},
    }


@pytest.mark.parametrize(("api_key", "version"), EVERY_VERSION)
@settings(max_examples=40)
@given(data=st.data())
def test_every_kind_and_version_round_trips(api_key: int, version: int, data: st.DataObject) -> None:
    fields = data.draw(messages(METADATA_SCHEMAS[api_key], version))
    decoded = decode_metadata_record(encode_metadata_record(api_key, version, fields))
    assert (decoded.api_key, decoded.version, decoded.fields) == (api_key, version, fields)


@given(st.sampled_from(EVERY_VERSION), st.binary(max_size=60))
def test_bytes_after_a_valid_header_fail_only_as_corrupt_data(spec: tuple[int, int], data: bytes) -> None:
    with contextlib.suppress(CorruptDataError):
        decode_metadata_record(frame(*spec) + data)

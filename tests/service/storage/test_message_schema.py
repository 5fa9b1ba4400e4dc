"""``message_schema``: Kafka's generated-message wire format as its module docstring specifies it: unsigned
varints, classic against flexible encodings of strings, bytes and arrays (exact bytes), nullable fields
by version, tagged fields (defaults when absent, ascending tags, unknown tags kept, leftovers refused),
fields bounded by versions, Kafka's ``Uuid`` string form; every message round trips and arbitrary bytes
fail only as ``CorruptDataError``."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.base.errors import CorruptDataError
from service.storage.message_schema import (
    UNKNOWN_TAGS,
    Field,
    Schema,
    decode_message,
    decode_uvarint,
    encode_message,
    encode_uvarint,
)

# A message with a field of each kind: v0-v1 classic, v2 flexible; ``note`` only from v1, nullable from
# v2; ``tags`` and ``extra`` tagged in the flexible version.
POINT = (Field("x", "int32"), Field("label", "string"))
SCHEMA = Schema(
    "TestValue",
    0,
    2,
    2,
    (
        Field("id", "int64"),
        Field("name", "string"),
        Field("note", "string", first_version=1, nullable_from=2),
        Field("blob", "bytes", nullable_from=0),
        Field("ratio", "float64"),
        Field("flag", "bool"),
        Field("port", "uint16"),
        Field("small", "int8"),
        Field("topic_id", "uuid"),
        Field("points", "struct", is_array=True, fields=POINT),
        Field("gone", "int16", last_version=0, default=7),
        Field("tags", "int32", first_version=2, is_array=True, tag=0, default=[]),
        Field("extra", "string", first_version=2, tag=3, default="none"),
    ),
)
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"  # 16 zero bytes, as Kafka's Uuid.toString writes them


def value(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {
        "id": 1,
        "name": "n",
        "note": "x",
        "blob": b"\x00\x01",
        "ratio": 0.5,
        "flag": True,
        "port": 65535,
        "small": -1,
        "topic_id": TOPIC_ID,
        "points": [{"x": 3, "label": "p"}],
    }
    base.update(fields)
    return base


@pytest.mark.parametrize(
    ("number", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        ((1 << 32) - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_unsigned_varints_are_kafkas(number: int, encoded: bytes) -> None:
    assert encode_uvarint(number) == encoded
    assert decode_uvarint(b"\x99" + encoded + b"\x00", 1) == (number, 1 + len(encoded))


def test_unsigned_varints_out_of_range_or_too_long_are_refused() -> None:
    for number in (-1, 1 << 32):
        with pytest.raises(ValueError, match="unsigned varint holds"):
            encode_uvarint(number)
    with pytest.raises(CorruptDataError, match="longer than 5 bytes"):
        decode_uvarint(b"\x80" * 5 + b"\x01", 0)
    with pytest.raises(CorruptDataError, match="runs past the end") as info:
        decode_uvarint(b"\x00\x80\x80", 1)
    assert info.value.position == 1


def test_a_classic_version_uses_fixed_width_lengths() -> None:
    schema = Schema(
        "S", 0, 1, 1, (Field("s", "string"), Field("b", "bytes"), Field("a", "int8", is_array=True))
    )
    assert encode_message(schema, 0, {"s": "ab", "b": b"\x09", "a": [1, 2]}) == (
        b"\x00\x02ab" + b"\x00\x00\x00\x01\x09" + b"\x00\x00\x00\x02\x01\x02"
    )


def test_a_flexible_version_uses_length_plus_one_varints_and_a_tag_section() -> None:
    schema = Schema(
        "S", 0, 1, 1, (Field("s", "string"), Field("b", "bytes"), Field("a", "int8", is_array=True))
    )
    assert encode_message(schema, 1, {"s": "ab", "b": b"\x09", "a": [1, 2]}) == (
        b"\x03ab" + b"\x02\x09" + b"\x03\x01\x02" + b"\x00"  # no tagged field
    )


@pytest.mark.parametrize("version", [0, 1, 2])
def test_messages_round_trip_in_every_version(version: int) -> None:
    message = value()
    data = encode_message(SCHEMA, version, message)
    decoded, end = decode_message(SCHEMA, version, data)
    assert end == len(data)
    expected = {k: v for k, v in message.items() if k != "note" or version >= 1}
    if version == 0:
        expected["gone"] = 7  # written as its default, read back
    if version == 2:
        expected.update(tags=[], extra="none")  # absent tagged fields read as their defaults
    assert decoded == expected


def test_a_field_outside_its_versions_is_not_on_the_wire() -> None:
    v0 = encode_message(SCHEMA, 0, value())
    v1 = encode_message(SCHEMA, 1, value())
    assert len(v1) == len(v0) - 2 + (2 + 1), "v1: no int16 'gone', a 1-char classic string 'note'"


def test_null_is_read_only_where_the_version_allows_it() -> None:
    data = encode_message(SCHEMA, 2, value(note=None, blob=None))
    decoded, _ = decode_message(SCHEMA, 2, data)
    assert (decoded["note"], decoded["blob"]) == (None, None)
    written = encode_message(SCHEMA, 1, value(note="x"))
    note_at = 8 + 3  # after the int64 id and the classic string "n"
    assert written[note_at : note_at + 3] == b"\x00\x01x"
    null_note = written[:note_at] + b"\xff\xff" + written[note_at + 3 :]  # v1's note is not nullable
    with pytest.raises(CorruptDataError, match="note is null, which version 1 does not allow") as info:
        decode_message(SCHEMA, 1, null_note)
    assert info.value.position == note_at + 2


def test_tagged_fields_are_written_when_not_default_in_ascending_order() -> None:
    data = encode_message(SCHEMA, 2, value(tags=[5], extra="yes"))
    assert data.endswith(b"\x02" + b"\x00\x05\x02\x00\x00\x00\x05" + b"\x03\x04\x04yes")
    decoded, _ = decode_message(SCHEMA, 2, data)
    assert (decoded["tags"], decoded["extra"]) == ([5], "yes")
    assert encode_message(SCHEMA, 2, value(extra="none")) == encode_message(SCHEMA, 2, value()), "default"


def test_a_list_default_is_a_new_list_per_message() -> None:
    first, _ = decode_message(SCHEMA, 2, encode_message(SCHEMA, 2, value()))
    second, _ = decode_message(SCHEMA, 2, encode_message(SCHEMA, 2, value()))
    tags = first["tags"]
    assert isinstance(tags, list)
    tags.append(1)
    assert second["tags"] == [] and SCHEMA.fields[11].default == []


def test_unknown_tags_are_kept_as_raw_bytes() -> None:
    """As Kafka keeps a tag it does not know (a newer writer's field)."""
    data = encode_message(SCHEMA, 2, value())[:-1] + b"\x01" + b"\x09\x02\xab\xcd"
    decoded, end = decode_message(SCHEMA, 2, data)
    assert end == len(data)
    assert decoded[UNKNOWN_TAGS] == [{"tag": 9, "data": b"\xab\xcd"}]


def test_a_tagged_field_with_bytes_left_over_is_corrupt() -> None:
    data = encode_message(SCHEMA, 2, value())[:-1] + b"\x01" + b"\x03\x05\x02ab\x00\x00"
    with pytest.raises(CorruptDataError, match="tagged field extra has 3 bytes left over"):
        decode_message(SCHEMA, 2, data)


def test_a_uuid_is_kafkas_string_form() -> None:
    schema = Schema("U", 0, 0, None, (Field("id", "uuid"),))
    raw = bytes(range(16))
    decoded, _ = decode_message(schema, 0, raw)
    assert decoded["id"] == "AAECAwQFBgcICQoLDA0ODw"  # URL-safe base64, no padding
    assert encode_message(schema, 0, decoded) == raw
    assert encode_message(schema, 0, {"id": raw}) == raw
    for bad in ("short", b"\x00" * 15, 7):
        with pytest.raises(ValueError, match="id is a uuid"):
            encode_message(schema, 0, {"id": bad})


def test_values_of_the_wrong_type_are_refused_naming_the_field() -> None:
    for field, bad in (("id", "1"), ("ratio", 1), ("flag", 1), ("points", {"x": 1}), ("name", 5)):
        with pytest.raises(ValueError, match=field):
            encode_message(SCHEMA, 1, value(**{field: bad}))


def test_a_version_the_schema_does_not_define_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="TestValue has versions 0-2, not 3"):
        encode_message(SCHEMA, 3, value())
    with pytest.raises(ValueError, match="not 3"):
        decode_message(SCHEMA, 3, b"")


def test_a_string_that_is_not_utf8_is_corrupt() -> None:
    schema = Schema("S", 0, 0, None, (Field("s", "string"),))
    with pytest.raises(CorruptDataError, match="s is not UTF-8") as info:
        decode_message(schema, 0, struct.pack(">h", 2) + b"\xc3\x28")
    assert info.value.position == 2


MESSAGES = st.fixed_dictionaries(
    {
        "id": st.integers(-(1 << 63), (1 << 63) - 1),
        "name": st.text(max_size=20),
        "note": st.none() | st.text(max_size=5),
        "blob": st.none() | st.binary(max_size=20),
        "ratio": st.floats(allow_nan=False),
        "flag": st.booleans(),
        "port": st.integers(0, 65535),
        "small": st.integers(-128, 127),
        "topic_id": st.binary(min_size=16, max_size=16),
        "points": st.lists(
            st.fixed_dictionaries(
                {"x": st.integers(-(1 << 31), (1 << 31) - 1), "label": st.text(max_size=5)}
            ),
            max_size=3,
        ),
        "tags": st.lists(st.integers(-(1 << 31), (1 << 31) - 1), max_size=3),
        "extra": st.text(max_size=5),
    }
)


@settings(max_examples=80)
@given(MESSAGES)
def test_any_flexible_message_round_trips(message: dict[str, object]) -> None:
    decoded, _ = decode_message(SCHEMA, 2, encode_message(SCHEMA, 2, message))
    again = encode_message(SCHEMA, 2, decoded)
    assert again == encode_message(SCHEMA, 2, message)
    assert {k: decoded[k] for k in ("id", "name", "note", "blob", "points", "tags", "extra")} == {
        k: message[k] for k in ("id", "name", "note", "blob", "points", "tags", "extra")
    }


@settings(max_examples=150)
@given(st.binary(max_size=80), st.integers(0, 2))
def test_arbitrary_bytes_fail_only_as_corrupt_data(data: bytes, version: int) -> None:
    with contextlib.suppress(CorruptDataError):
        decode_message(SCHEMA, version, data)


def test_null_is_written_only_where_the_version_allows_it() -> None:
    """What no reader would take is refused at the writer: ``note`` is nullable from v2 only, ``name``
    never."""
    with pytest.raises(ValueError, match="note cannot be null in version 1"):
        encode_message(SCHEMA, 1, value(note=None))
    with pytest.raises(ValueError, match="name cannot be null in version 2"):
        encode_message(SCHEMA, 2, value(name=None, note=None))
    written = encode_message(SCHEMA, 2, value(note=None))
    decoded, _ = decode_message(SCHEMA, 2, written)
    assert decoded["note"] is None

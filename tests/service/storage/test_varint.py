"""Kafka's zig-zag varints round-trip over int64, match known encodings and reject corrupt input cleanly."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from service.base.errors import CorruptDataError
from service.storage.varint import decode_varint, encode_varint, varint_size

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

# Every value where the encoded size changes, on both sides of zero, plus the int32/int64 limits.
BOUNDARIES = sorted(
    {INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX, 0, -1, 1}
    | {sign * (1 << bits) + delta for bits in range(6, 63, 7) for sign in (1, -1) for delta in (-1, 0, 1)}
)
int64s = st.one_of(st.integers(INT64_MIN, INT64_MAX), st.sampled_from(BOUNDARIES))

KNOWN_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (300, "d804"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
    (INT64_MAX, "feffffffffffffffff01"),
    (INT64_MIN, "ffffffffffffffffff01"),
]


# --- round trips -----------------------------------------------------------------------------------------


@settings(max_examples=200)
@given(value=int64s)
@example(value=INT64_MIN)
@example(value=INT64_MAX)
def test_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert decode_varint(encoded, 0) == (value, len(encoded))


@settings(max_examples=200)
@given(value=int64s)
def test_varint_size_is_encoded_length(value: int) -> None:
    encoded = encode_varint(value)
    assert varint_size(value) == len(encoded)
    assert 1 <= len(encoded) <= 10


@settings(max_examples=100)
@given(value=int64s, prefix=st.binary(max_size=20), suffix=st.binary(max_size=20))
def test_decodes_in_the_middle_of_a_buffer(value: int, prefix: bytes, suffix: bytes) -> None:
    encoded = encode_varint(value)
    buffer = prefix + encoded + suffix
    assert decode_varint(buffer, len(prefix)) == (value, len(prefix) + len(encoded))
    assert decode_varint(memoryview(buffer), len(prefix)) == (value, len(prefix) + len(encoded))
    assert decode_varint(bytearray(buffer), len(prefix)) == (value, len(prefix) + len(encoded))


@settings(max_examples=100)
@given(values=st.lists(int64s, max_size=20))
def test_back_to_back_varints_decode_in_order(values: list[int]) -> None:
    buffer = b"".join(encode_varint(value) for value in values)
    decoded = []
    position = 0
    while position < len(buffer):
        value, position = decode_varint(buffer, position)
        decoded.append(value)
    assert decoded == values


@settings(max_examples=100)
@given(value=st.integers(INT32_MIN, INT32_MAX))
def test_int32_values_take_at_most_five_bytes(value: int) -> None:
    assert len(encode_varint(value)) <= 5


# --- known encodings -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "hex_bytes"), KNOWN_VECTORS, ids=[str(v) for v, _ in KNOWN_VECTORS])
def test_known_vectors(value: int, hex_bytes: str) -> None:
    expected = bytes.fromhex(hex_bytes)
    assert encode_varint(value) == expected
    assert varint_size(value) == len(expected)
    assert decode_varint(expected, 0) == (value, len(expected))


@pytest.mark.parametrize("value", [INT64_MIN - 1, INT64_MAX + 1, 1 << 64, -(1 << 70)])
def test_encode_refuses_values_outside_int64(value: int) -> None:
    with pytest.raises(ValueError, match="outside int64"):
        encode_varint(value)


# --- bad input -------------------------------------------------------------------------------------------


@settings(max_examples=200)
@given(data=st.binary(max_size=24), position=st.integers(0, 30))
def test_arbitrary_bytes_decode_or_raise_only_corrupt_data_error(data: bytes, position: int) -> None:
    try:
        value, next_position = decode_varint(data, position)
    except CorruptDataError as exc:
        assert exc.position is not None
        assert exc.position >= min(position, len(data))
        return
    assert INT64_MIN <= value <= INT64_MAX
    assert position < next_position <= min(len(data), position + 10)
    # Whatever decodes re-encodes to a varint no longer than the bytes it came from.
    assert len(encode_varint(value)) <= next_position - position


@pytest.mark.parametrize(
    "data",
    [b"", b"\x80", b"\xff\xff", b"\x80" * 9],
    ids=["empty", "one-continuation", "two-continuations", "nine-continuations"],
)
def test_truncated_varint_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptDataError, match="past the end") as caught:
        decode_varint(data, 0)
    assert caught.value.position == 0


def test_truncated_varint_names_where_it_starts() -> None:
    with pytest.raises(CorruptDataError) as caught:
        decode_varint(b"\x00\x00\x00\x80\x80", 3)
    assert caught.value.position == 3
    assert "position 3" in str(caught.value)


@pytest.mark.parametrize("length", [11, 12, 20])
def test_varint_longer_than_ten_bytes_is_corrupt(length: int) -> None:
    data = b"\x80" * (length - 1) + b"\x00"
    with pytest.raises(CorruptDataError, match="longer than 10 bytes") as caught:
        decode_varint(b"\x01" + data, 1)
    assert caught.value.position == 1


def test_eleven_byte_varint_is_corrupt_even_when_unterminated() -> None:
    with pytest.raises(CorruptDataError, match="longer than 10 bytes"):
        decode_varint(b"\xff" * 11, 0)


@pytest.mark.parametrize("last_byte", [0x02, 0x03, 0x7F])
def test_ten_byte_varint_overflowing_int64_is_corrupt(last_byte: int) -> None:
    with pytest.raises(CorruptDataError, match="overflows int64"):
        decode_varint(b"\xff" * 9 + bytes((last_byte,)), 0)


def test_ten_byte_varint_at_the_int64_limit_decodes() -> None:
    assert decode_varint(b"\xff" * 9 + b"\x01", 0) == (INT64_MIN, 10)


def test_corrupt_data_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        decode_varint(b"\x80", 0)

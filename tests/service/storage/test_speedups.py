"""The C record decoder must agree with the Python one (the specification) on every input."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.base.errors import CorruptDataError
from service.storage import records as records_module
from service.storage.records import Header, Record, decode_records_py, encode_records

speedups = records_module._speedups

records_strategy = st.lists(
    st.builds(
        Record,
        offset=st.integers(0, 2**31 - 1),
        timestamp=st.integers(-(2**40), 2**42),
        key=st.none() | st.binary(max_size=20),
        value=st.none() | st.binary(max_size=40),
        headers=st.lists(
            st.builds(Header, key=st.text(max_size=8), value=st.none() | st.binary(max_size=8)), max_size=3
        ).map(tuple),
    ),
    max_size=20,
)


def python_result(raw: bytes, count: int, base: int, ts: int, lat: int | None) -> list[Record] | str:
    try:
        return decode_records_py(raw, count, base, ts, lat)
    except CorruptDataError as exc:
        return f"corrupt: {exc}"


def c_result(raw: bytes, count: int, base: int, ts: int, lat: int | None) -> list[Record] | None:
    """The C result, or None when it hands the input to the Python decoder."""
    assert speedups is not None
    try:
        return speedups.decode_records(raw, count, base, ts, lat)  # type: ignore[no-any-return]
    except speedups.Fallback:
        return None


def test_the_c_decoder_is_built() -> None:
    assert speedups is not None, "service/storage/_speedups.c did not build: is a C compiler installed?"


@settings(max_examples=300)
@given(
    records=records_strategy,
    base=st.integers(0, 2**40),
    ts=st.integers(-1, 2**41),
    log_append_time=st.none() | st.integers(0, 2**41),
)
def test_valid_records_decode_identically(
    records: list[Record], base: int, ts: int, log_append_time: int | None
) -> None:
    raw = encode_records(records, 0, 0)
    expected = python_result(raw, len(records), base, ts, log_append_time)
    got = c_result(raw, len(records), base, ts, log_append_time)
    assert got == expected
    assert got is None or all(type(r) is Record and all(type(h) is Header for h in r.headers) for r in got)


@settings(max_examples=500)
@given(raw=st.binary(max_size=200), count=st.integers(0, 5))
def test_arbitrary_bytes_fall_back_or_agree(raw: bytes, count: int) -> None:
    got = c_result(raw, count, 10, 1000, None)
    if got is not None:
        assert python_result(raw, count, 10, 1000, None) == got


@settings(max_examples=300)
@given(records=records_strategy.filter(bool), data=st.data())
def test_mutated_records_fall_back_or_agree(records: list[Record], data: st.DataObject) -> None:
    raw = bytearray(encode_records(records, 0, 0))
    index = data.draw(st.integers(0, len(raw) - 1))
    raw[index] = data.draw(st.integers(0, 255))
    count = data.draw(st.integers(0, len(records) + 1))
    got = c_result(bytes(raw), count, 0, 0, None)
    if got is not None:
        assert python_result(bytes(raw), count, 0, 0, None) == got


def test_overflowing_offsets_fall_back_to_python_integers() -> None:
    raw = encode_records([Record(2**62, 2**62, b"k", b"v")], 0, 0)
    assert c_result(raw, 1, 2**62, 2**62, None) is None
    assert decode_records_py(raw, 1, 2**62, 2**62)[0].offset == 2**63

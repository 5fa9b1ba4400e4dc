"""The produce fast path accepts a subset of what the request model accepts, with the same records."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.fast_records import fast_records
from api.problems import ApiProblem
from api.produce import model_records, produce_request_model
from service.storage.records import Record

MAX_RECORDS = 4
NOW_MS = 1_700_000_000_000
MODEL = produce_request_model(MAX_RECORDS)
LONG_MAX = (1 << 63) - 1

# -- the common shape: what the fast path must take ------------------------------------------------

common_data = st.one_of(
    st.none(),
    st.builds(lambda t: {"type": "STRING", "data": t}, st.text()),
    st.builds(lambda b: {"type": "BINARY", "data": base64.b64encode(b).decode()}, st.binary()),
)
common_header = st.fixed_dictionaries({"key": st.text()}, optional={"value": common_data})
common_record = st.fixed_dictionaries(
    {},
    optional={
        "key": common_data,
        "value": common_data,
        "timestamp": st.one_of(st.none(), st.integers(0, LONG_MAX)),
        "headers": st.lists(common_header, max_size=3),
    },
)
common_request = st.fixed_dictionaries({"records": st.lists(common_record, min_size=1, max_size=MAX_RECORDS)})

# -- anything near it: the fast path may defer, but must never disagree -----------------------------

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=5),
    st.just([]),
    st.just({}),
)
base64ish = st.text(alphabet="ABCDab01+/=-_ \n!", max_size=12)
any_data = st.one_of(
    common_data,
    junk,
    st.fixed_dictionaries({"type": st.sampled_from(["STRING", "BINARY", "JSON", "TEXT"]), "data": junk}),
    st.fixed_dictionaries({"type": st.just("BINARY"), "data": base64ish}),
    st.fixed_dictionaries(
        {"type": st.just("JSON"), "data": st.recursive(junk, lambda c: st.lists(c, max_size=2))}
    ),
    st.fixed_dictionaries({"type": st.just("STRING"), "data": st.text(), "extra": junk}),
)
any_header = st.one_of(
    common_header,
    junk,
    st.fixed_dictionaries({}, optional={"key": st.one_of(st.text(), junk), "value": any_data, "x": junk}),
)
any_record = st.one_of(
    common_record,
    junk,
    st.fixed_dictionaries(
        {},
        optional={
            "key": any_data,
            "value": any_data,
            "timestamp": st.one_of(junk, st.integers(-5, 5), st.integers(LONG_MAX - 1, LONG_MAX + 1)),
            "headers": st.one_of(junk, st.lists(any_header, max_size=2)),
            "offset": junk,
        },
    ),
)
any_request: st.SearchStrategy[Any] = st.one_of(
    common_request,
    junk,
    st.fixed_dictionaries(
        {"records": st.one_of(junk, st.lists(any_record, max_size=MAX_RECORDS + 2))}, optional={"extra": junk}
    ),
)


def via_model(body: bytes) -> list[Record] | None:
    try:
        return model_records(body, MODEL, now_ms=NOW_MS)
    except ApiProblem:
        return None


@settings(max_examples=300, deadline=None)
@given(common_request)
def test_the_common_shape_takes_the_fast_path_with_the_models_result(request: dict[str, Any]) -> None:
    body = json.dumps(request).encode()
    fast = fast_records(body, max_records=MAX_RECORDS, now_ms=NOW_MS)
    assert fast is not None
    assert fast == via_model(body)


@settings(max_examples=500, deadline=None)
@given(any_request, st.booleans())
def test_the_fast_path_never_disagrees_with_the_model(request: Any, ascii_only: bool) -> None:
    try:
        body = json.dumps(request, ensure_ascii=ascii_only).encode("utf-8")
    except (ValueError, UnicodeEncodeError):  # a lone surrogate cannot be sent as UTF-8
        return
    fast = fast_records(body, max_records=MAX_RECORDS, now_ms=NOW_MS)
    if fast is not None:
        assert fast == via_model(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"records": [{"value": {"type": "BINARY", "data": "YWJ"}}]}',  # unpadded
        b'{"records": [{"value": {"type": "BINARY", "data": "YQ==YQ=="}}]}',
        b'{"records": [{"value": {"type": "BINARY", "data": "-_-_"}}]}',  # URL-safe alphabet
        b'{"records": [{"value": {"type": "JSON", "data": {"a": 1}}}]}',
        b'{"records": [{"timestamp": true}]}',
        b'{"records": [{"timestamp": 1.0}]}',
        b'{"records": [{"headers": null}]}',
        b'{"records": [{}, {}, {}, {}, {}]}',  # over the cap: the model names the limit
        b'{"records": []}',
        b'\xef\xbb\xbf{"records": [{}]}',  # a BOM
        '{"records": [{}]}'.encode("utf-16"),
        b"[" * 100_000,
    ],
)
def test_unusual_bodies_go_to_the_model(body: bytes) -> None:
    assert fast_records(body, max_records=MAX_RECORDS, now_ms=NOW_MS) is None

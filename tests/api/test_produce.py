"""``api.produce`` on its own: a request's records numbered as it lists them, the limit named when there are
too many, and the records split into as few v2 batches as ``max.message.bytes`` allows, offsets contiguous
inside each, a record too large for any batch alone in its own. (Produce over HTTP is in
``routes/test_records.py``; the fast path against the model in ``test_fast_records.py``.)"""

from __future__ import annotations

import json

import pytest

from api.problems import ApiProblem
from api.produce import estimated_record_bytes, model_records, produce_request_model, to_producer_batches
from service.storage.records import Header, Record, iter_batches

NOW_MS = 1_700_000_000_000


def body(*records: dict[str, object]) -> bytes:
    return json.dumps({"records": list(records)}).encode()


def test_the_models_records_are_numbered_and_stamped_now_unless_given() -> None:
    request = body(
        {"key": {"type": "STRING", "data": "k"}, "value": {"type": "BINARY", "data": "AAE="}},
        {"value": None, "timestamp": 5, "headers": [{"key": "h", "value": {"type": "STRING", "data": "x"}}]},
    )

    records = model_records(request, produce_request_model(10), now_ms=NOW_MS)

    assert records == [
        Record(0, NOW_MS, b"k", b"\x00\x01"),
        Record(1, 5, None, None, (Header("h", b"x"),)),
    ]


def test_too_many_records_name_the_key_that_sets_the_limit() -> None:
    record: dict[str, object] = {"value": {"type": "STRING", "data": "v"}}
    three = body(record, record, record)

    with pytest.raises(ApiProblem) as raised:
        model_records(three, produce_request_model(2), now_ms=NOW_MS)

    assert raised.value.status_code == 422
    assert [e.field for e in raised.value.errors] == ["records"]
    assert "api.max.records.per.request=2" in str(raised.value.detail)


def test_the_estimate_bounds_the_encoded_size() -> None:
    records = [
        Record(0, NOW_MS, None, None),
        Record(0, NOW_MS, b"k" * 300, b"v" * 70_000, (Header("header", b"x" * 200), Header("h", None))),
    ]
    for record in records:
        [batch] = to_producer_batches([record], 1 << 30)
        [alone] = to_producer_batches([Record(0, NOW_MS, None, None)], 1 << 30)
        assert len(batch) - len(alone) <= estimated_record_bytes(record) - estimated_record_bytes(records[0])
        assert len(batch) <= 61 + estimated_record_bytes(record)  # 61: the v2 batch header


def test_records_are_split_into_batches_under_the_limit_in_order() -> None:
    records = [Record(i, NOW_MS, b"key-%d" % i, b"v" * 100) for i in range(10)]
    limit = 61 + 3 * estimated_record_bytes(records[0])  # three records a batch

    batches = [batch for data in to_producer_batches(records, limit) for batch in iter_batches(data)]

    assert [(b.base_offset, b.records_count) for b in batches] == [(0, 3), (3, 3), (6, 3), (9, 1)]
    assert [r.key for b in batches for r in b.records()] == [r.key for r in records]
    assert all(b.size_bytes <= limit for b in batches)


def test_a_record_larger_than_the_limit_gets_a_batch_of_its_own() -> None:
    records = [
        Record(0, NOW_MS, None, b"s"),
        Record(1, NOW_MS, None, b"h" * 5000),
        Record(2, NOW_MS, None, b"s"),
    ]

    batches = [b for data in to_producer_batches(records, 1000) for b in iter_batches(data)]

    assert [(b.base_offset, b.records_count) for b in batches] == [(0, 1), (1, 1), (2, 1)]
    assert to_producer_batches([], 1000) == []

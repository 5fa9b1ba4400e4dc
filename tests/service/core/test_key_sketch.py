"""``key_sketch``: the HyperLogLog key counts of sealed segments (exact while sparse, within a few
standard errors once dense), their merge, the freed-bytes model of a round (exact at one record per
batch), what ``sketch_segment`` counts on a real segment, and the JSON codec (round trip; any other
document raises only ``ValueError``)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.base.clock import ManualClock
from service.core.key_sketch import (
    BATCH_OVERHEAD_BYTES,
    KeySketch,
    SegmentSketch,
    decode_sketch,
    encode_sketch,
    estimate_freed_bytes,
    sketch_segment,
)
from service.storage.control import encode_end_txn_marker_batch
from service.storage.records import Record
from tests.service.retention_helpers import START_MS, new_partition_log

SPARSE_MAX = 1024  # the module's sparse limit
STANDARD_ERROR = 1.04 / 64  # 2**12 registers


def sketch_of(keys: range | list[int], prefix: bytes = b"k") -> KeySketch:
    sketch = KeySketch()
    for i in keys:
        sketch.add(prefix + b"%d" % i)
    return sketch


def test_a_sparse_sketch_counts_distinct_keys_exactly() -> None:
    sketch = sketch_of([1, 2, 3, 2, 1])
    assert sketch.cardinality() == 3.0
    assert KeySketch().cardinality() == 0.0
    full = sketch_of(range(SPARSE_MAX))
    assert full.hashes is not None and full.cardinality() == SPARSE_MAX, "still exact at the limit"


def test_past_the_sparse_limit_the_sketch_turns_into_registers() -> None:
    sketch = sketch_of(range(SPARSE_MAX + 1))
    assert sketch.hashes is None and sketch.registers is not None and len(sketch.registers) == 4096
    assert abs(sketch.cardinality() - (SPARSE_MAX + 1)) < 3 * STANDARD_ERROR * (SPARSE_MAX + 1)


@pytest.mark.parametrize("count", [2_000, 10_000, 50_000])
def test_a_dense_sketch_is_within_three_standard_errors(count: int) -> None:
    """HyperLogLog with 2**12 registers: standard error 1.04/√4096 ≈ 1.6% (linear counting below
    2.5·m, the raw estimate above)."""
    estimate = sketch_of(range(count)).cardinality()
    assert abs(estimate - count) < 3 * STANDARD_ERROR * count


def test_adding_a_key_again_changes_nothing_in_a_dense_sketch() -> None:
    sketch = sketch_of(range(3000))
    before = sketch.cardinality()
    for i in range(3000):
        sketch.add(b"k%d" % i)
    assert sketch.cardinality() == before


def test_merging_sparse_sketches_is_exact_and_leaves_them_alone() -> None:
    a, b = sketch_of(range(0, 600)), sketch_of(range(400, 1000))
    merged = a.merged([b])
    assert merged.cardinality() == 1000
    assert (a.cardinality(), b.cardinality()) == (600, 600), "merged returns a copy"


def test_merging_sparse_sketches_past_the_limit_densifies() -> None:
    merged = sketch_of(range(0, 1000)).merged([sketch_of(range(1000, 2000))])
    assert merged.hashes is None
    assert abs(merged.cardinality() - 2000) < 3 * STANDARD_ERROR * 2000


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (range(0, 5000), range(3000, 8000)),  # dense and dense
        (range(4800, 5300), range(0, 5000)),  # sparse into dense
        (range(0, 5000), range(4800, 5300)),  # dense, then sparse
    ],
)
def test_a_merge_is_the_sketch_of_the_union(first: range, second: range) -> None:
    """The register-wise maximum is the sketch of the union, whatever the forms merged: the same
    registers as one sketch of every key."""
    union = max(first.stop, second.stop)
    merged = sketch_of(first).merged([sketch_of(second)])
    assert merged.registers == sketch_of(range(union)).registers
    assert abs(merged.cardinality() - union) < 3 * STANDARD_ERROR * union


def test_sketches_merge_across_processes() -> None:
    """Keys are hashed with BLAKE2b (not Python's salted ``hash``): a decoded sketch merges with a live
    one as if one sketch had seen every key."""
    a = decode_sketch(json.loads(json.dumps(encode_sketch(SegmentSketch(1, 1, 1, sketch_of(range(0, 700)))))))
    merged = a.keys.merged([sketch_of(range(500, 900))])
    assert merged.cardinality() == 900


def test_one_record_per_batch_the_freed_bytes_are_exact() -> None:
    """``n`` batches of one record of ``B`` bytes, ``d`` distinct keys: ``(n - d) · B`` go."""
    batch_bytes, n, d = 76, 100, 30
    sketch = SegmentSketch(n * batch_bytes, n, n, sketch_of([i % d for i in range(n)]))
    assert estimate_freed_bytes([sketch]) == (n - d) * batch_bytes


def test_freed_bytes_across_segments_count_keys_once() -> None:
    """A key in two segments survives once: the run's distinct count is the merged sketch's."""
    batch_bytes = 76
    old = SegmentSketch(50 * batch_bytes, 50, 50, sketch_of(range(50)))
    new = SegmentSketch(50 * batch_bytes, 50, 50, sketch_of(range(50)))
    assert estimate_freed_bytes([old]) == 0, "every key distinct: nothing to free"
    assert estimate_freed_bytes([old, new]) == 50 * batch_bytes


def test_a_batch_survives_while_any_of_its_records_does() -> None:
    """Many records a batch: the headers of surviving batches stay; with every record of one key the
    survivors are one record and, nearly, one batch's header."""
    records, per_batch, record_bytes = 1000, 10, 20
    batches = records // per_batch
    size = batches * BATCH_OVERHEAD_BYTES + records * record_bytes
    one_key = SegmentSketch(size, batches, records, sketch_of([0] * records))
    freed = estimate_freed_bytes([one_key])
    kept = size - freed
    assert record_bytes + BATCH_OVERHEAD_BYTES * 0.9 <= kept <= record_bytes + BATCH_OVERHEAD_BYTES * 1.1


def test_nothing_to_free_without_keyed_records() -> None:
    assert estimate_freed_bytes([]) == 0
    assert estimate_freed_bytes([SegmentSketch(500, 3, 0, KeySketch())]) == 0


def test_the_distinct_count_never_exceeds_the_records() -> None:
    """A dense sketch may overestimate: the model caps distinct keys at the records and frees nothing
    rather than a negative figure."""
    sketch = SegmentSketch(2000 * 76, 2000, 2000, sketch_of(range(2000)))
    assert 0 <= estimate_freed_bytes([sketch]) < 0.05 * 2000 * 76, "every key distinct: about nothing"
    capped = SegmentSketch(10 * 76, 10, 10, sketch_of(range(2000)))  # more keys than records claimed
    assert estimate_freed_bytes([capped]) == 0


def test_sketch_segment_reads_keys_of_data_records_only(tmp_path: Path) -> None:
    """Batches count every batch, control ones included; records and keys count keyed data records."""
    clock = ManualClock(START_MS)
    log = new_partition_log(tmp_path / "t-0", clock, policy="compact")
    log.append_records([Record(0, START_MS, b"a", b"1"), Record(1, START_MS, b"b", b"2")])
    log.append_records([Record(0, START_MS, b"a", b"3")])
    log.append_records([Record(0, START_MS, b"c", None)])  # a tombstone has a key
    log.append_records(
        [Record(0, START_MS, b"d", b"4")],
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    log.append_batches(
        encode_end_txn_marker_batch(
            offset=0, producer_id=5, producer_epoch=0, commit=True, timestamp=START_MS
        )
    )
    segment = log.active_segment
    sketch = sketch_segment(segment)
    assert (sketch.size_bytes, sketch.batches, sketch.records) == (segment.size_bytes, 5, 5)
    assert sketch.keys.cardinality() == 4  # a, b, c, d: the marker's key is not a data key
    assert sketch.keys == _keys(b"a", b"b", b"c", b"d")


def _keys(*keys: bytes) -> KeySketch:
    sketch = KeySketch()
    for key in keys:
        sketch.add(key)
    return sketch


@given(st.lists(st.binary(max_size=8), max_size=1500), st.integers(0, 10**9), st.integers(0, 10**6))
def test_encode_decode_round_trip(keys: list[bytes], size: int, records: int) -> None:
    sketch = SegmentSketch(size, records // 2, records, _keys(*keys))
    document = json.loads(json.dumps(encode_sketch(sketch)))
    assert decode_sketch(document) == sketch


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**65), 2**65) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=60)
@given(
    st.one_of(
        JSON,
        st.fixed_dictionaries(
            {"size": JSON, "batches": st.integers(-1, 3), "records": st.integers(-1, 3)},
            optional={"hashes": JSON, "registers": JSON | st.text(max_size=12)},
        ),
    )
)
def test_any_other_document_raises_only_value_error(document: object) -> None:
    with contextlib.suppress(ValueError):
        decode_sketch(document)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "is an object, not list"),
        ({"size": -1, "batches": 0, "records": 0, "hashes": []}, "are counts"),
        ({"size": 1, "batches": 0, "records": 0}, "neither valid hashes nor 4096 registers"),
        ({"size": 1, "batches": 0, "records": 0, "hashes": [1 << 64]}, "neither valid hashes"),
        ({"size": 1, "batches": 0, "records": 0, "registers": "AAAA"}, "4096 registers"),
    ],
)
def test_a_bad_document_names_what_is_wrong(document: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_sketch(document)

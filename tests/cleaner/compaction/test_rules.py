"""The cleaner's batch and record rules (tombstones, transactions, producers' last batches) as plain
functions, batch by batch."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cleaner.compaction.rules
from cleaner.compaction.rules import (
    BatchRetention,
    CleaningContext,
    LastRecord,
    ProducerScan,
    active_producers,
    batch_retention,
    delete_horizon_for,
    empty_batch,
    filter_batch,
)
from service.base.clock import ManualClock
from service.storage.compression import CompressionType
from service.storage.control import encode_end_txn_marker_batch
from service.storage.records import (
    RECORD_BATCH_OVERHEAD,
    Header,
    Record,
    RecordBatch,
    TimestampType,
    decode_batch,
    encode_batch,
)
from tests.cleaner.helpers import DAY_MS, LONG_MAX, Producer, new_log

NOW = 1_400_000_000_000


def batch(records: list[Record], **fields: object) -> RecordBatch:
    return decode_batch(encode_batch(records, **fields))  # type: ignore[arg-type]


def rec(offset: int, key: bytes | None, value: bytes | None, timestamp: int = 1000) -> Record:
    return Record(offset, timestamp, key, value)


def ctx(
    latest: dict[bytes, int] | None = None,
    *,
    map_latest_offset: int = 1_000,
    now_ms: int = NOW,
    upper_bound: int = 10_000,
    producers: dict[int, LastRecord] | None = None,
) -> CleaningContext:
    table = latest or {}
    return CleaningContext(
        lambda key: table.get(key, -1), map_latest_offset, now_ms, DAY_MS, upper_bound, producers or {}
    )


def marker(offset: int, *, commit: bool, producer_id: int = 1, epoch: int = 0) -> RecordBatch:
    data = encode_end_txn_marker_batch(
        offset=offset, producer_id=producer_id, producer_epoch=epoch, commit=commit, timestamp=5
    )
    return decode_batch(data)


def test_batch_with_every_record_surviving_is_copied_byte_for_byte() -> None:
    source = batch([rec(10, b"a", b"1"), rec(11, b"b", b"2")], producer_id=3, base_sequence=7)
    outcome = filter_batch(source, can_discard=False, ctx=ctx({b"a": 10, b"b": 11}))
    assert outcome.is_unchanged and outcome.data is source.data
    assert (outcome.records_read, outcome.records_retained, outcome.retention) == (
        2,
        2,
        BatchRetention.DELETE_EMPTY,
    )


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.label)
@pytest.mark.parametrize("timestamp_type", list(TimestampType), ids=lambda t: t.label)
def test_rebuilt_batch_keeps_its_header_fields(codec: CompressionType, timestamp_type: TimestampType) -> None:
    records = [
        rec(20, b"a", b"old", 1_000),
        rec(21, b"b", b"kept", 900),
        rec(22, b"c", b"x" * 50, 1_200),
        rec(23, b"a", b"new", 800),
    ]
    records[1] = records[1]._replace(headers=(Header("h", b"v"), Header("n", None)))
    source = batch(
        records,
        compression=codec,
        timestamp_type=timestamp_type,
        producer_id=9,
        producer_epoch=4,
        base_sequence=100,
        is_transactional=True,
        partition_leader_epoch=6,
        max_timestamp=5_000 if timestamp_type is TimestampType.LOG_APPEND_TIME else None,
    )
    outcome = filter_batch(source, can_discard=False, ctx=ctx({b"a": 23, b"b": 21, b"c": 99}))
    assert outcome.data is not None and not outcome.is_unchanged
    cleaned = decode_batch(outcome.data)
    same = ("base_offset", "last_offset_delta", "producer_id", "producer_epoch", "base_sequence")
    assert [getattr(cleaned, f) for f in same] == [getattr(source, f) for f in same]
    assert (cleaned.compression, cleaned.timestamp_type) == (codec, timestamp_type)
    assert (cleaned.is_transactional, cleaned.is_control, cleaned.partition_leader_epoch) == (True, False, 6)
    assert cleaned.last_sequence == 103
    kept = cleaned.records()
    assert [(r.offset, r.key, r.value, r.headers) for r in kept] == [
        (21, b"b", b"kept", records[1].headers),
        (23, b"a", b"new", ()),
    ]
    if timestamp_type is TimestampType.CREATE_TIME:
        assert [r.timestamp for r in kept] == [900, 800]
        assert cleaned.max_timestamp == outcome.max_timestamp == 900
    else:
        assert cleaned.max_timestamp == outcome.max_timestamp == 5_000
    assert not cleaned.has_delete_horizon


def test_tombstone_gets_a_horizon_then_goes_once_it_passes() -> None:
    source = batch([rec(5, b"k", None, timestamp=-1)])
    first = filter_batch(source, can_discard=False, ctx=ctx({b"k": 5}))
    assert first.data is not None
    stamped = decode_batch(first.data)
    assert stamped.delete_horizon_ms == stamped.base_timestamp == NOW + DAY_MS
    assert [(r.offset, r.timestamp, r.value) for r in stamped.records()] == [(5, -1, None)]
    before = filter_batch(stamped, can_discard=False, ctx=ctx({b"k": 5}, now_ms=NOW + DAY_MS - 1))
    assert before.is_unchanged, "an existing horizon is kept as is"
    after = filter_batch(stamped, can_discard=False, ctx=ctx({b"k": 5}, now_ms=NOW + DAY_MS))
    assert after.data is None and after.records_retained == 0


def test_existing_horizon_is_kept_when_a_batch_is_rebuilt() -> None:
    source = batch([rec(1, b"a", b"1"), rec(2, b"b", None)], delete_horizon_ms=NOW + 5)
    outcome = filter_batch(source, can_discard=False, ctx=ctx({b"a": 7, b"b": 2}))
    assert outcome.data is not None
    assert decode_batch(outcome.data).delete_horizon_ms == NOW + 5


def test_horizon_is_capped_at_long_max() -> None:
    assert delete_horizon_for(LONG_MAX - 10, DAY_MS) == LONG_MAX
    assert delete_horizon_for(NOW, DAY_MS) == NOW + DAY_MS


def test_unkeyed_records_are_dropped_and_counted_unless_past_the_map() -> None:
    source = batch([rec(1, None, b"x"), rec(2, b"a", b"1"), rec(3, None, b"y")])
    outcome = filter_batch(source, can_discard=False, ctx=ctx({b"a": 2}, map_latest_offset=2))
    assert outcome.invalid_records == 1
    assert outcome.data is not None
    assert [r.offset for r in decode_batch(outcome.data).records()] == [2, 3], "offset 3 is past the map"


def test_aborted_data_batch_is_deleted_unread_unless_it_must_stay_empty() -> None:
    source = batch(
        [rec(4, b"a", b"1")], producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    gone = filter_batch(source, can_discard=True, ctx=ctx({b"a": 4}))
    assert (gone.data, gone.retention, gone.records_read) == (None, BatchRetention.DELETE, 0)
    last = filter_batch(source, can_discard=True, ctx=ctx({b"a": 4}, producers={1: LastRecord(4, 0)}))
    assert last.retention is BatchRetention.RETAIN_EMPTY
    assert last.data == empty_batch(source)


def test_empty_batch_layout() -> None:
    source = batch(
        [rec(30, b"a", b"1", 700), rec(32, b"b", b"2", 900)],
        compression=CompressionType.GZIP,
        producer_id=5,
        producer_epoch=2,
        base_sequence=11,
        is_transactional=True,
        partition_leader_epoch=3,
        delete_horizon_ms=NOW,
    )
    empty = decode_batch(empty_batch(source))
    assert empty.size_bytes == RECORD_BATCH_OVERHEAD and empty.records_count == 0
    assert (empty.base_offset, empty.last_offset, empty.base_timestamp, empty.max_timestamp) == (
        30,
        32,
        -1,
        900,
    )
    assert (empty.compression, empty.has_delete_horizon, empty.is_transactional) == (
        CompressionType.NONE,
        False,
        True,
    )
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence, empty.partition_leader_epoch) == (
        5,
        2,
        11,
        3,
    )
    assert empty.records() == []


def test_marker_that_may_go_gets_a_horizon_then_goes() -> None:
    commit = marker(8, commit=True)
    stamped = filter_batch(commit, can_discard=True, ctx=ctx())
    assert stamped.data is not None and stamped.retention is BatchRetention.DELETE_EMPTY
    with_horizon = decode_batch(stamped.data)
    assert with_horizon.delete_horizon_ms == NOW + DAY_MS
    assert filter_batch(with_horizon, can_discard=True, ctx=ctx(now_ms=NOW + DAY_MS - 1)).is_unchanged
    gone = filter_batch(with_horizon, can_discard=True, ctx=ctx(now_ms=NOW + DAY_MS))
    assert (gone.data, gone.retention) == (None, BatchRetention.DELETE)
    kept = filter_batch(with_horizon, can_discard=False, ctx=ctx(now_ms=NOW + DAY_MS))
    assert kept.is_unchanged, "a marker that must stay ignores the horizon"


def test_marker_carrying_the_producers_epoch_stays_empty() -> None:
    commit = decode_batch(
        encode_end_txn_marker_batch(offset=8, producer_id=1, producer_epoch=3, commit=True, timestamp=5)
    )
    stamped = decode_batch(filter_batch(commit, can_discard=True, ctx=ctx()).data or b"")
    outcome = filter_batch(
        stamped, can_discard=True, ctx=ctx(now_ms=LONG_MAX, producers={1: LastRecord(None, 3)})
    )
    assert outcome.retention is BatchRetention.RETAIN_EMPTY
    empty = decode_batch(outcome.data or b"")
    assert (empty.records_count, empty.is_control, empty.producer_epoch) == (0, True, 3)
    other_epoch = filter_batch(
        stamped, can_discard=True, ctx=ctx(now_ms=LONG_MAX, producers={1: LastRecord(None, 4)})
    )
    assert other_epoch.data is None


def test_batch_retention_order() -> None:
    data = batch([rec(4, b"a", b"1")], producer_id=1, producer_epoch=0, base_sequence=0)
    last = {1: LastRecord(4, 0)}
    assert batch_retention(data, discard_records=True, ctx=ctx(producers=last)) is BatchRetention.RETAIN_EMPTY
    assert batch_retention(data, discard_records=True, ctx=ctx(upper_bound=5)) is BatchRetention.RETAIN_EMPTY
    assert batch_retention(data, discard_records=True, ctx=ctx()) is BatchRetention.DELETE
    assert batch_retention(data, discard_records=False, ctx=ctx()) is BatchRetention.DELETE_EMPTY
    plain = batch([rec(4, b"a", b"1")])
    assert batch_retention(plain, discard_records=False, ctx=ctx(producers={-1: LastRecord(4, 0)})) is (
        BatchRetention.DELETE_EMPTY
    )


def test_last_batch_of_the_round_is_kept_empty() -> None:
    """KAFKA-17076 (4.0): the batch ending right below the upper bound keeps the last offset visible."""
    source = batch([rec(8, b"a", b"1"), rec(9, b"b", b"2")])
    outcome = filter_batch(source, can_discard=False, ctx=ctx({b"a": 20, b"b": 20}, upper_bound=10))
    assert outcome.retention is BatchRetention.RETAIN_EMPTY
    assert decode_batch(outcome.data or b"").last_offset == 9


def test_active_producers_follow_kafkas_producer_state(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    idempotent = Producer(log, 1, transactional=False)
    idempotent.send(1, 2)
    txn = Producer(log, 2)
    txn.send(3)
    txn.commit()
    bumped = Producer(log, 3)
    bumped.send(4)
    bumped.epoch = 1
    bumped.abort()  # the coordinator aborts with a bumped epoch: the batch metadata is cleared
    log.append_records([Record(0, -1, b"5", b"5")])
    assert active_producers(log) == {1: LastRecord(1, 0), 2: LastRecord(2, 0), 3: LastRecord(None, 1)}


def test_producer_scan_reads_only_new_appends_and_rescans_when_needed(
    log_dir: Path, clock: ManualClock
) -> None:
    log = new_log(log_dir, clock, segment_bytes=200)
    producer = Producer(log, 1, transactional=False)
    producer.send(1)
    scan = ProducerScan()
    assert scan.refresh(log) == {1: LastRecord(0, 0)}
    for key in range(2, 8):
        producer.send(key)
    assert len(log.segments) > 2
    assert scan.refresh(log) == {1: LastRecord(6, 0)}
    log.delete_oldest_segments(len(log.segments))
    Producer(log, 2, transactional=False).send(9)
    assert scan.refresh(log) == {2: LastRecord(7, 0)}, "its segment gone, the scan starts over"


producer_steps = st.lists(
    st.tuples(
        st.sampled_from([1, 2, 3, 2**40]), st.sampled_from(["data", "data", "commit", "abort", "bump"])
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(steps=producer_steps, segment_bytes=st.sampled_from([150, 400, 1 << 20]))
def test_the_c_header_scan_gives_the_producers_the_python_scan_gives(
    steps: list[tuple[int, str]], segment_bytes: int
) -> None:
    """The C scan returns a producer's run of data batches as its last batch's row: over interleaved
    producers' batches, markers and epoch bumps (a marker with a new epoch), and plain batches, the fold
    ends where the Python scan of every batch ends, for the whole log and for each segment's refresh."""
    with tempfile.TemporaryDirectory() as tmp:
        log = new_log(Path(tmp) / "t-0", ManualClock(NOW), segment_bytes=segment_bytes)
        producers = {pid: Producer(log, pid, transactional=pid != 3) for pid, _ in steps}
        scans = ProducerScan(), ProducerScan()
        for i, (pid, step) in enumerate(steps):
            producer = producers[pid]
            if step == "data":
                producer.send(i, i + 1)
            elif step == "bump":
                producer.epoch, producer.sequence = producer.epoch + 1, 0
                producer.abort()
            else:
                producer.commit() if step == "commit" else producer.abort()
            if i % 7 == 0:
                log.append_records([Record(0, -1, b"plain", b"v")])
            if i % 5 == 4 or i == len(steps) - 1:  # a refresh scans the batches appended since the last
                native = scans[0].refresh(log), active_producers(log)
                with pytest.MonkeyPatch.context() as python_only:
                    python_only.setattr(cleaner.compaction.rules, "has_native", lambda: False)
                    assert native == (scans[1].refresh(log), active_producers(log))
        log.close()

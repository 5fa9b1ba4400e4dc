"""Kafka's ``CleanedTransactionMetadata`` batch by batch, its copies, and collecting aborted txns."""

from __future__ import annotations

from pathlib import Path

from cleaner.compaction.txn_metadata import (
    CleanedTransactionMetadata,
    ControlBatchResult,
    collect_aborted_txns,
)
from service.base.clock import ManualClock
from service.storage.control import ControlRecordType, encode_control_key, encode_end_txn_marker_batch
from service.storage.records import Record, RecordBatch, decode_batch, encode_batch
from service.storage.txn_index import AbortedTxn
from tests.cleaner.helpers import Producer, new_log


def data(offset: int, producer_id: int, *, transactional: bool = True, count: int = 1) -> RecordBatch:
    records = [Record(offset + i, 0, b"k", b"v") for i in range(count)]
    return decode_batch(
        encode_batch(
            records,
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=transactional,
        )
    )


def end_marker(offset: int, producer_id: int, *, commit: bool) -> RecordBatch:
    raw = encode_end_txn_marker_batch(
        offset=offset, producer_id=producer_id, producer_epoch=0, commit=commit, timestamp=0
    )
    return decode_batch(raw)


def test_aborted_data_is_reported_and_its_marker_kept_with_the_txn() -> None:
    txn = AbortedTxn(1, 2, 5, 6)
    state = CleanedTransactionMetadata()
    state.add_aborted_transactions([txn])
    assert not state.on_batch_read(data(0, 1)), "before the aborted txn starts: committed data"
    assert state.on_batch_read(data(2, 1, count=2))
    assert not state.on_batch_read(data(4, 2)), "another producer"
    assert not state.on_batch_read(data(4, 1, transactional=False)), "never aborted when not transactional"
    assert state.on_control_batch_read(end_marker(5, 1, commit=False)) == ControlBatchResult(False, txn)


def test_abort_marker_without_data_seen_may_go() -> None:
    state = CleanedTransactionMetadata()
    state.add_aborted_transactions([AbortedTxn(1, 2, 5, 6)])
    assert state.on_control_batch_read(end_marker(5, 1, commit=False)) == ControlBatchResult(True)


def test_commit_marker_may_go_only_without_its_data() -> None:
    state = CleanedTransactionMetadata()
    assert not state.on_batch_read(data(0, 1))
    assert state.on_control_batch_read(end_marker(1, 1, commit=True)) == ControlBatchResult(False)
    assert state.on_control_batch_read(end_marker(2, 1, commit=True)) == ControlBatchResult(True)


def test_other_control_records_stay_and_empty_control_batches_may_go() -> None:
    state = CleanedTransactionMetadata()
    leader_change = decode_batch(
        encode_batch(
            [Record(0, 0, encode_control_key(ControlRecordType.LEADER_CHANGE), b"\x00")],
            is_control=True,
        )
    )
    assert state.on_control_batch_read(leader_change) == ControlBatchResult(False)
    empty = decode_batch(encode_batch([], base_offset=1, last_offset_delta=0, is_control=True, producer_id=1))
    assert state.on_control_batch_read(empty) == ControlBatchResult(True)


def test_an_ongoing_aborted_txn_is_not_replaced() -> None:
    """Kafka's getOrElseUpdate: a second entry for the producer activated meanwhile is dropped."""
    first, second = AbortedTxn(1, 0, 10, 11), AbortedTxn(1, 3, 20, 21)
    state = CleanedTransactionMetadata()
    state.add_aborted_transactions([second, first])
    assert state.on_batch_read(data(4, 1))
    assert state.on_control_batch_read(end_marker(10, 1, commit=False)) == ControlBatchResult(False, first)
    assert not state.on_batch_read(data(12, 1))


def test_copies_are_independent() -> None:
    txn = AbortedTxn(1, 0, 5, 6)
    state = CleanedTransactionMetadata()
    state.add_aborted_transactions([txn, AbortedTxn(2, 7, 9, 10)])
    assert not state.on_batch_read(data(0, 3))
    copy = state.copy()
    assert state.on_batch_read(data(1, 1))
    assert state.on_control_batch_read(end_marker(5, 1, commit=False)) == ControlBatchResult(False, txn)
    assert state.on_control_batch_read(end_marker(6, 3, commit=True)) == ControlBatchResult(False)
    # the copy saw none of that
    assert copy.on_control_batch_read(end_marker(5, 1, commit=False)) == ControlBatchResult(True)
    assert copy.on_control_batch_read(end_marker(6, 3, commit=True)) == ControlBatchResult(False)
    assert copy.on_batch_read(data(8, 2)) and state.on_batch_read(data(8, 2))


def test_collect_aborted_txns_reads_later_segments_until_complete(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=160)
    p1, p2 = Producer(log, 1), Producer(log, 2)
    p1.send(1)
    p2.send(2)
    p1.abort()
    p2.abort()
    log.append_records([Record(0, -1, b"3", b"3")])
    p1.send(4)
    p1.abort()
    segments = log.segments
    assert len(segments) > 2
    everything = [t for s in segments for t in s.txn_index.all_aborted()]
    assert [t.producer_id for t in everything] == [1, 2, 1]
    assert collect_aborted_txns(segments, 0, 1) == everything[:1], "complete once an entry's LSO passes 1"
    assert collect_aborted_txns(segments, 0, log.log_end_offset) == everything
    assert collect_aborted_txns(segments, 4, log.log_end_offset) == everything[2:]

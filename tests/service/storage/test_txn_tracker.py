"""``TxnTracker``: which transactions are open, the first unstable offset, and the ``.txnindex`` entry an
ABORT marker yields, with its last stable offset as Kafka's ``ProducerStateManager.lastStableOffset``
computes it (the first offset of another open transaction, else the offset after the marker)."""

from __future__ import annotations

from service.storage.control import ControlRecordType
from service.storage.txn_index import AbortedTxn
from service.storage.txn_tracker import TxnTracker
from tests.service.storage.producer_batches import control_batch, data_batch, marker


def test_non_transactional_batches_open_nothing() -> None:
    tracker = TxnTracker()
    assert tracker.on_batch(data_batch(0)) == []
    assert tracker.on_batch(data_batch(1, 7, sequence=0)) == [], "idempotent, not transactional"
    assert tracker.first_unstable_offset() is None


def test_a_transaction_opens_at_its_first_batch_and_stays_there() -> None:
    """Later batches of the same transaction do not move its first offset (Kafka's
    ``currentTxnFirstOffset`` is set once per transaction)."""
    tracker = TxnTracker()
    tracker.on_batch(data_batch(5, 7, sequence=0, count=2, transactional=True))
    tracker.on_batch(data_batch(9, 7, sequence=2, transactional=True))
    assert tracker.first_unstable_offset() == 5


def test_the_first_unstable_offset_is_the_earliest_open_transaction() -> None:
    tracker = TxnTracker()
    tracker.on_batch(data_batch(10, 8, sequence=0, transactional=True))
    tracker.on_batch(data_batch(3, 7, sequence=0, transactional=True))
    assert tracker.first_unstable_offset() == 3
    assert tracker.on_batch(marker(11, 7, commit=True)) == []
    assert tracker.first_unstable_offset() == 10
    tracker.on_batch(marker(12, 8, commit=True))
    assert tracker.first_unstable_offset() is None


def test_an_abort_with_no_other_open_transaction_is_stable_after_its_marker() -> None:
    tracker = TxnTracker()
    tracker.on_batch(data_batch(1, 9, sequence=0, count=2, transactional=True))
    assert tracker.on_batch(marker(3, 9, commit=False)) == [AbortedTxn(9, 1, 3, 4)]
    assert tracker.first_unstable_offset() is None


def test_an_abort_is_stable_only_up_to_another_open_transaction() -> None:
    """Kafka's ``lastStableOffset(completedTxn)``: the first offset of the next incomplete transaction."""
    tracker = TxnTracker()
    tracker.on_batch(data_batch(0, 1, sequence=0, transactional=True))
    tracker.on_batch(data_batch(1, 2, sequence=0, transactional=True))
    assert tracker.on_batch(marker(2, 2, commit=False)) == [AbortedTxn(2, 1, 2, 0)]
    assert tracker.first_unstable_offset() == 0, "producer 1's transaction is still open"


def test_the_high_watermark_bounds_the_last_stable_offset() -> None:
    tracker = TxnTracker()
    tracker.on_batch(data_batch(0, 1, sequence=0, transactional=True))
    tracker.on_batch(data_batch(4, 2, sequence=0, transactional=True))
    assert tracker.on_batch(marker(5, 1, commit=False), high_watermark=2) == [AbortedTxn(1, 0, 5, 2)]
    assert tracker.on_batch(marker(6, 2, commit=False), high_watermark=3) == [AbortedTxn(2, 4, 6, 3)]


def test_a_marker_without_an_open_transaction_starts_the_aborted_range_at_itself() -> None:
    """Kafka's ``appendEndTxnMarker``: ``currentTxnFirstOffset.orElse(offset)`` (e.g. the data went with
    a deleted segment, or the transaction held no data here)."""
    tracker = TxnTracker()
    assert tracker.on_batch(marker(20, 4, commit=False)) == [AbortedTxn(4, 20, 20, 21)]
    assert tracker.on_batch(marker(21, 4, commit=True)) == []


def test_a_commit_closes_without_an_index_entry() -> None:
    tracker = TxnTracker()
    tracker.on_batch(data_batch(0, 3, sequence=0, transactional=True))
    assert tracker.on_batch(marker(1, 3, commit=True)) == []
    assert tracker.first_unstable_offset() is None
    tracker.on_batch(data_batch(2, 3, sequence=1, transactional=True))
    assert tracker.first_unstable_offset() == 2, "the producer's next transaction opens afresh"


def test_control_batches_that_are_not_markers_close_nothing() -> None:
    tracker = TxnTracker()
    tracker.on_batch(data_batch(0, 3, sequence=0, transactional=True))
    assert tracker.on_batch(control_batch(1, 3, ControlRecordType.LEADER_CHANGE)) == []
    assert tracker.on_batch(control_batch(2, 3, ControlRecordType.UNKNOWN)) == []
    assert tracker.first_unstable_offset() == 0


def test_a_marker_that_is_not_transactional_is_ignored() -> None:
    """Kafka writes markers with the transactional bit; a control batch without it is not a marker."""
    tracker = TxnTracker()
    tracker.on_batch(data_batch(0, 3, sequence=0, transactional=True))
    assert tracker.on_batch(control_batch(1, 3, ControlRecordType.ABORT, transactional=False)) == []
    assert tracker.first_unstable_offset() == 0

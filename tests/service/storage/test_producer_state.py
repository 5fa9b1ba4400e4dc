"""``ProducerStateManager``: what each batch does to its producer's entry (Kafka's ``ProducerAppendInfo``),
the snapshot entries it gives and takes back, and expiry (Kafka's ``removeExpiredProducers``: idle for
``producer.id.expiration.ms`` and no open transaction)."""

from __future__ import annotations

from pathlib import Path

from service.storage.control import ControlRecordType
from service.storage.producer_snapshot import ProducerSnapshotEntry, read_snapshot, write_snapshot
from service.storage.producer_state import ProducerStateManager
from service.storage.txn_index import AbortedTxn
from tests.service.storage.producer_batches import control_batch, data_batch, marker


def entry(manager: ProducerStateManager, producer_id: int) -> ProducerSnapshotEntry:
    (found,) = [e for e in manager.snapshot_entries() if e.producer_id == producer_id]
    return found


def test_a_data_batch_sets_the_producers_sequence_offsets_and_timestamp() -> None:
    manager = ProducerStateManager()
    manager.on_batch(data_batch(10, 7, epoch=2, sequence=5, count=3, timestamp=1000))
    assert entry(manager, 7) == ProducerSnapshotEntry(
        producer_id=7,
        producer_epoch=2,
        last_sequence=7,
        last_offset=12,
        offset_delta=2,
        timestamp=1002,
        coordinator_epoch=-1,
        current_txn_first_offset=-1,
    )


def test_the_last_batch_wins_and_a_new_epoch_replaces_the_old() -> None:
    manager = ProducerStateManager()
    manager.on_batch(data_batch(0, 7, epoch=0, sequence=0, count=2))
    manager.on_batch(data_batch(2, 7, epoch=1, sequence=0, timestamp=5000))
    got = entry(manager, 7)
    assert (got.producer_epoch, got.last_sequence, got.last_offset, got.offset_delta, got.timestamp) == (
        1,
        0,
        2,
        0,
        5000,
    )


def test_batches_without_a_producer_id_make_no_entry() -> None:
    manager = ProducerStateManager()
    manager.on_batch(data_batch(0))
    assert manager.producer_ids == [] and manager.snapshot_entries() == []


def test_a_marker_keeps_the_coordinator_epoch_and_not_the_data_fields() -> None:
    """An end-transaction marker carries no sequence: the producer's last sequence and offset stay its
    last data batch's; the marker's coordinator epoch and timestamp are kept."""
    manager = ProducerStateManager()
    manager.on_batch(data_batch(0, 7, sequence=0, count=2, transactional=True))
    assert entry(manager, 7).current_txn_first_offset == 0
    aborted = manager.on_batch(marker(2, 7, commit=False, coordinator_epoch=9, timestamp=4000))
    assert aborted == [AbortedTxn(7, 0, 2, 3)], "the transaction part still runs"
    got = entry(manager, 7)
    assert (got.last_sequence, got.last_offset, got.offset_delta) == (1, 1, 1)
    assert (got.coordinator_epoch, got.timestamp, got.current_txn_first_offset) == (9, 4000, -1)


def test_a_control_batch_that_is_not_a_marker_leaves_the_coordinator_epoch() -> None:
    manager = ProducerStateManager()
    manager.on_batch(marker(0, 7, commit=True, coordinator_epoch=4))
    manager.on_batch(control_batch(1, 7, ControlRecordType.LEADER_CHANGE))
    assert entry(manager, 7).coordinator_epoch == 4


def test_producers_are_listed_by_id() -> None:
    manager = ProducerStateManager()
    for offset, pid in enumerate((30, 10, 20)):
        manager.on_batch(data_batch(offset, pid, sequence=0))
    assert manager.producer_ids == [10, 20, 30]
    assert [e.producer_id for e in manager.snapshot_entries()] == [10, 20, 30]


def test_snapshot_entries_load_back_through_a_snapshot_file(tmp_path: Path) -> None:
    """What a snapshot saves, a new manager restores: the same entries, and the open transaction is
    open again (its first offset is the first unstable offset)."""
    manager = ProducerStateManager()
    manager.on_batch(data_batch(0, 1, sequence=0, count=2))
    manager.on_batch(data_batch(2, 2, epoch=3, sequence=4, transactional=True))
    manager.on_batch(marker(3, 1, commit=True, coordinator_epoch=6))
    path = write_snapshot(tmp_path, 4, manager.snapshot_entries())
    restored = ProducerStateManager()
    restored.on_batch(data_batch(0, 99, sequence=0, transactional=True))  # replaced by the load
    restored.load_entries(read_snapshot(path))
    assert restored.snapshot_entries() == manager.snapshot_entries()
    assert restored.producer_ids == [1, 2]
    assert restored.first_unstable_offset() == 2
    assert restored.on_batch(marker(4, 2, commit=False, epoch=3)) == [AbortedTxn(2, 2, 4, 5)]


def test_expiry_drops_idle_producers_from_the_expiration_time_on() -> None:
    """Kafka's ``isProducerExpired``: ``now - lastTimestamp >= producer.id.expiration.ms``."""
    manager = ProducerStateManager()
    manager.on_batch(data_batch(0, 1, sequence=0, timestamp=1000))
    manager.on_batch(data_batch(1, 2, sequence=0, timestamp=1500))
    assert manager.remove_expired_producers(now_ms=1999, expiration_ms=1000) == []
    assert manager.remove_expired_producers(now_ms=2000, expiration_ms=1000) == [1]
    assert manager.producer_ids == [2]
    assert manager.remove_expired_producers(now_ms=10_000, expiration_ms=1000) == [2]
    assert manager.producer_ids == []


def test_a_producer_with_an_open_transaction_never_expires() -> None:
    manager = ProducerStateManager()
    manager.on_batch(data_batch(0, 1, sequence=0, transactional=True, timestamp=1000))
    assert manager.remove_expired_producers(now_ms=1_000_000, expiration_ms=1000) == []
    manager.on_batch(marker(1, 1, commit=True, timestamp=1100))
    assert manager.remove_expired_producers(now_ms=2099, expiration_ms=1000) == []
    assert manager.remove_expired_producers(now_ms=2100, expiration_ms=1000) == [1], "idle since its marker"

"""Per-producer state of a partition (Kafka ``ProducerStateManager``): what a snapshot saves and restores.

For every producer id seen in the log: its epoch, the last batch's last sequence, last offset, offset delta
and max timestamp, the coordinator epoch of its last transaction marker, and the first offset of its open
transaction (kept by :class:`TxnTracker`, which this extends). Data batches update the entry; a COMMIT or
ABORT marker closes the transaction and records the coordinator epoch. Entries leave only by expiry: a
producer with no open transaction whose last timestamp is ``producer.id.expiration.ms`` or more in the
past. Deleting segments never removes a producer (Kafka scenario A15).

Not thread-safe: ``PartitionLog`` calls it under its lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from service.base.errors import CorruptDataError
from service.storage.control import decode_end_txn_marker
from service.storage.producer_snapshot import ProducerSnapshotEntry
from service.storage.records import NO_SEQUENCE, NO_TIMESTAMP, RecordBatch
from service.storage.txn_index import AbortedTxn
from service.storage.txn_tracker import TxnTracker

__all__ = ["ProducerStateManager"]

_NO_OFFSET = -1
_NO_COORDINATOR_EPOCH = -1


@dataclass(slots=True)
class _Producer:
    epoch: int
    last_sequence: int = NO_SEQUENCE
    last_offset: int = _NO_OFFSET
    offset_delta: int = 0
    timestamp: int = NO_TIMESTAMP
    coordinator_epoch: int = _NO_COORDINATOR_EPOCH


class ProducerStateManager(TxnTracker):
    def __init__(self) -> None:
        super().__init__()
        self._producers: dict[int, _Producer] = {}

    @property
    def producer_ids(self) -> list[int]:
        return sorted(self._producers)

    def on_batch(self, batch: RecordBatch, *, high_watermark: int | None = None) -> list[AbortedTxn]:
        if batch.producer_id >= 0:
            self._update(batch)
        return super().on_batch(batch, high_watermark=high_watermark)

    def _update(self, batch: RecordBatch) -> None:
        producer = self._producers.get(batch.producer_id)
        if producer is None:
            producer = self._producers[batch.producer_id] = _Producer(batch.producer_epoch)
        producer.epoch = batch.producer_epoch
        producer.timestamp = batch.max_timestamp
        if not batch.is_control:
            producer.last_sequence = batch.last_sequence
            producer.last_offset = batch.last_offset
            producer.offset_delta = batch.last_offset - batch.base_offset
            return
        try:
            records = batch.records()
            if records:
                producer.coordinator_epoch = decode_end_txn_marker(records[0]).coordinator_epoch
        except CorruptDataError:  # not a transaction marker: no coordinator epoch to keep
            pass

    # -- snapshots ---------------------------------------------------------------------------------

    def snapshot_entries(self) -> list[ProducerSnapshotEntry]:
        """Every producer as a snapshot stores it, by producer id."""
        return [
            ProducerSnapshotEntry(
                producer_id=pid,
                producer_epoch=p.epoch,
                last_sequence=p.last_sequence,
                last_offset=p.last_offset,
                offset_delta=p.offset_delta,
                timestamp=p.timestamp,
                coordinator_epoch=p.coordinator_epoch,
                current_txn_first_offset=self._open.get(pid, _NO_OFFSET),
            )
            for pid, p in sorted(self._producers.items())
        ]

    def load_entries(self, entries: Iterable[ProducerSnapshotEntry]) -> None:
        """Replace the state with a snapshot's."""
        self._producers.clear()
        self._open.clear()
        for e in entries:
            self._producers[e.producer_id] = _Producer(
                e.producer_epoch,
                e.last_sequence,
                e.last_offset,
                e.offset_delta,
                e.timestamp,
                e.coordinator_epoch,
            )
            if e.current_txn_first_offset >= 0:
                self._open[e.producer_id] = e.current_txn_first_offset

    # -- expiry ------------------------------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Kafka's ``removeExpiredProducers``: drop idle producers without an open transaction."""
        expired = [
            pid
            for pid, p in self._producers.items()
            if pid not in self._open and now_ms - p.timestamp >= expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        return expired

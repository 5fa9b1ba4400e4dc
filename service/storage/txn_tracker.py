"""Open transactions per producer, enough to write ``.txnindex`` entries and to know the last stable offset.

A transactional data batch opens its producer's transaction (first offset = its base offset); a COMMIT or
ABORT marker closes it, and an ABORT yields the ``AbortedTxn`` entry that Kafka stores in the ``.txnindex``
of the segment holding the marker. Not thread-safe: ``PartitionLog`` locks.
"""

from __future__ import annotations

from service.storage.control import ControlRecordType, decode_control_type
from service.storage.records import RecordBatch
from service.storage.txn_index import AbortedTxn

__all__ = ["TxnTracker"]


class TxnTracker:
    def __init__(self) -> None:
        self._open: dict[int, int] = {}  # producer id → first offset of its open transaction

    def first_unstable_offset(self) -> int | None:
        return min(self._open.values(), default=None)

    def on_batch(self, batch: RecordBatch, *, high_watermark: int | None = None) -> list[AbortedTxn]:
        """Track ``batch``; return the aborted transaction it completes, if it is an ABORT marker.

        The last stable offset stored with it is bounded by ``high_watermark`` (default: the marker's
        next offset, which is the high watermark right after a single-replica append of the marker).
        """
        if high_watermark is None:
            high_watermark = batch.next_offset
        if not batch.is_transactional or batch.producer_id < 0:
            return []
        if not batch.is_control:
            self._open.setdefault(batch.producer_id, batch.base_offset)
            return []
        records = batch.records()
        if not records:
            return []
        control_type = decode_control_type(records[0].key)
        if control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            return []
        first_offset = self._open.pop(batch.producer_id, batch.base_offset)
        if control_type is ControlRecordType.COMMIT:
            return []
        still_open = self.first_unstable_offset()
        last_stable = high_watermark if still_open is None else min(still_open, high_watermark)
        return [AbortedTxn(batch.producer_id, first_offset, batch.last_offset, last_stable)]

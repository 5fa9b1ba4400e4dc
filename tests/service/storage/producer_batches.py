"""Decoded record batches as producers and transaction coordinators write them, for the tests of the
per-producer state (``txn_tracker``, ``producer_state``): real v2 bytes, decoded as the log reads them."""

from __future__ import annotations

from service.storage.control import ControlRecordType, encode_control_key, encode_end_txn_marker_batch
from service.storage.records import (
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Record,
    RecordBatch,
    decode_batch,
    encode_batch,
)

__all__ = ["control_batch", "data_batch", "marker"]


def data_batch(
    offset: int,
    producer_id: int = NO_PRODUCER_ID,
    *,
    epoch: int = 0,
    sequence: int = NO_SEQUENCE,
    count: int = 1,
    transactional: bool = False,
    timestamp: int = 1000,
) -> RecordBatch:
    """``count`` keyed records from ``offset`` on, timestamps ``timestamp`` up by one per record."""
    records = [Record(offset + i, timestamp + i, b"k%d" % i, b"v") for i in range(count)]
    return decode_batch(
        encode_batch(
            records,
            producer_id=producer_id,
            producer_epoch=epoch if producer_id != NO_PRODUCER_ID else -1,
            base_sequence=sequence,
            is_transactional=transactional,
        )
    )


def marker(
    offset: int,
    producer_id: int,
    *,
    commit: bool,
    epoch: int = 0,
    coordinator_epoch: int = 0,
    timestamp: int = 2000,
) -> RecordBatch:
    """A COMMIT or ABORT marker at ``offset``."""
    return decode_batch(
        encode_end_txn_marker_batch(
            offset=offset,
            producer_id=producer_id,
            producer_epoch=epoch,
            commit=commit,
            timestamp=timestamp,
            coordinator_epoch=coordinator_epoch,
        )
    )


def control_batch(
    offset: int, producer_id: int, control_type: ControlRecordType, *, transactional: bool = True
) -> RecordBatch:
    """A control batch of another type than a transaction marker (its value is not a marker's)."""
    record = Record(offset, 3000, encode_control_key(control_type), b"\x00")
    return decode_batch(
        encode_batch(
            [record],
            producer_id=producer_id,
            producer_epoch=0,
            is_transactional=transactional,
            is_control=True,
        )
    )

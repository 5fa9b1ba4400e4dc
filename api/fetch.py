"""Fetch over HTTP with Kafka's semantics: from an offset inside [log start, log end], the next records.

An offset below the log start offset or past the log end offset is out of range (416 with the range;
``PartitionLog.read`` itself would silently start at the log start). An offset that compaction removed
gives the next record. Control batches are skipped. At most ``max_records`` records, and no more once
their keys and values pass ``max_bytes`` (the first record always comes, as Kafka's fetch does).
``next_offset`` is where the following fetch should start.
"""

from __future__ import annotations

import base64
from typing import Any

from service.errors import OffsetOutOfRangeError
from service.storage.log import PartitionLog
from service.storage.records import Record

__all__ = ["fetch_document", "record_doc"]


def fetch_document(log: PartitionLog, offset: int, *, max_records: int, max_bytes: int) -> dict[str, Any]:
    """The ``FetchResponse`` document (built as plain data: this is the API's hot read path)."""
    start, end = log.log_start_offset, log.log_end_offset
    if offset < start or offset > end:
        raise OffsetOutOfRangeError(
            f"offset {offset} is outside the log of {log.topic_partition}",
            offset=offset,
            log_start_offset=start,
            log_end_offset=end,
        )
    records, next_offset = _read(log, offset, max_records, max_bytes)
    tp = log.topic_partition
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "log_start_offset": log.log_start_offset,
        "log_end_offset": log.log_end_offset,
        "high_watermark": log.high_watermark,
        "next_offset": max(next_offset, offset),
        "records": [record_doc(r) for r in records],
    }


def _read(log: PartitionLog, offset: int, max_records: int, max_bytes: int) -> tuple[list[Record], int]:
    end_before = log.log_end_offset  # everything below it is covered by a read that reaches the end
    out: list[Record] = []
    size = 0
    for batch in log.read_batches(offset):
        if batch.is_control:
            continue
        for record in batch.records():
            if record.offset < offset:
                continue
            out.append(record)
            size += len(record.key or b"") + len(record.value or b"")
            if len(out) >= max_records or size >= max_bytes:
                return out, record.offset + 1
    return out, max(end_before, out[-1].offset + 1 if out else offset)


def _binary(data: bytes | None) -> dict[str, str] | None:
    return None if data is None else {"type": "BINARY", "data": base64.b64encode(data).decode("ascii")}


def record_doc(record: Record) -> dict[str, Any]:
    """A fetched record: key, value and header values as BINARY."""
    return {
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": _binary(record.key),
        "value": _binary(record.value),
        "headers": [{"key": h.key, "value": _binary(h.value)} for h in record.headers],
    }

"""Fetch over HTTP with Kafka's semantics: from an offset inside [log start, log end], the next records.

An offset below the log start offset or past the log end offset is out of range (416 with the range;
``PartitionLog.read`` itself would silently start at the log start). An offset that compaction removed
gives the next record. Control batches are skipped. At most ``max_records`` records, and no more once
their keys and values pass ``max_bytes`` (the first record always comes, as Kafka's fetch does).
``next_offset`` is where the following fetch should start. Only records below the high watermark are
served, as a Kafka consumer reads them; an offset between it and the log end offset gives no records.

Every batch's CRC is verified before its records are decoded, as a Kafka consumer with ``check.crcs=true``
does: the records before a corrupt batch are returned (``next_offset`` stops at it), and a fetch that
starts at one answers 500 naming the topic, partition and offset (never a file). In a log that is not
compacted the offsets are contiguous, so a hole between two batches means lost data (a truncated
segment): the fetch goes on past it, and logs and counts it.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from api.problems import ApiProblem
from service.base.errors import CorruptDataError, OffsetOutOfRangeError
from service.core.ports import PartitionRecords
from service.storage.records import Record

__all__ = [
    "FETCH_CORRUPT_BATCH",
    "FETCH_MISSING_RANGE",
    "FetchFaultRecorder",
    "FetchFaults",
    "fetch_document",
    "record_doc",
]

logger = logging.getLogger(__name__)

FETCH_CORRUPT_BATCH = "corrupt-batch"
FETCH_MISSING_RANGE = "missing-range"
FetchFaultRecorder = Callable[[str], None]  # called with FETCH_CORRUPT_BATCH or FETCH_MISSING_RANGE


def _ignore(_kind: str) -> None:
    pass


class FetchFaults:
    """The fetches that met corrupt data or passed missing offsets, by kind, since start-up: recorded by
    the fetch route (``record``), read by the metrics (``logcleaner_fetch_faults_total``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards _counts
        self._counts: Counter[str] = Counter()

    def record(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)


def fetch_document(
    log: PartitionRecords,
    offset: int,
    *,
    max_records: int,
    max_bytes: int,
    on_fault: FetchFaultRecorder = _ignore,
) -> dict[str, Any]:
    """The ``FetchResponse`` document (built as plain data: this is the API's hot read path)."""
    start, end = log.log_start_offset, log.log_end_offset
    if offset < start or offset > end:
        raise OffsetOutOfRangeError(
            f"offset {offset} is outside the log of {log.topic_partition}",
            offset=offset,
            log_start_offset=start,
            log_end_offset=end,
        )
    records, next_offset = _read(log, offset, max_records, max_bytes, on_fault)
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


def _read(
    log: PartitionRecords, offset: int, max_records: int, max_bytes: int, on_fault: FetchFaultRecorder
) -> tuple[list[Record], int]:
    # Consumers read below the high watermark (Kafka's fetch at ``FetchIsolation.HIGH_WATERMARK``): records
    # a broker had not acknowledged are not served, though their offsets are inside the log.
    high_watermark = log.high_watermark
    end_before = min(log.log_end_offset, high_watermark)  # all below it is covered by a read reaching the end
    contiguous = not log.config.is_compacted
    expected = max(offset, log.log_start_offset)  # the next offset a contiguous log holds
    out: list[Record] = []
    size = 0
    batches = log.read_batches(offset)
    while True:
        try:
            batch = next(batches, None)
            if batch is None or batch.base_offset >= high_watermark:
                break
            if not batch.is_crc_valid():
                raise CorruptDataError(
                    f"CRC mismatch in the batch of offsets [{batch.base_offset}, {batch.last_offset}]"
                )
            records = [] if batch.is_control else batch.records()
        except CorruptDataError as exc:
            return _stop_at_corrupt(log, out, expected, exc, on_fault)
        if contiguous and batch.base_offset > expected:
            expected = max(expected, log.log_start_offset)  # retention may have passed the read meanwhile
            if batch.base_offset > expected:
                _missing_range(log, expected, batch.base_offset, on_fault)
        expected = max(expected, batch.next_offset)
        for record in records:
            if record.offset < offset:
                continue
            if record.offset >= high_watermark:
                return out, max(high_watermark, offset)
            out.append(record)
            size += len(record.key or b"") + len(record.value or b"")
            if len(out) >= max_records or size >= max_bytes:
                return out, record.offset + 1
    return out, max(end_before, out[-1].offset + 1 if out else offset)


def _stop_at_corrupt(
    log: PartitionRecords, out: list[Record], at: int, exc: CorruptDataError, on_fault: FetchFaultRecorder
) -> tuple[list[Record], int]:
    """The good records read so far; with none, a 500 that names where (the file and position are logged)."""
    tp = log.topic_partition
    on_fault(FETCH_CORRUPT_BATCH)
    logger.error("Fetch of %s stopped at offset %d by corrupt data: %s", tp, at, exc)
    if out:
        return out, out[-1].offset + 1
    raise ApiProblem(
        500,
        f"corrupt data in partition {tp.partition} of topic {tp.topic!r} at offset {at}: {exc.reason}; "
        "it is not served (the daemon's log names the file)",
        extensions={"topic": tp.topic, "partition": tp.partition, "offset": at},
    )


def _missing_range(log: PartitionRecords, start: int, end: int, on_fault: FetchFaultRecorder) -> None:
    on_fault(FETCH_MISSING_RANGE)
    logger.warning(
        "Fetch of %s passed missing offsets [%d, %d): the log is not compacted, so a segment may have "
        "been truncated",
        log.topic_partition,
        start,
        end,
    )


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

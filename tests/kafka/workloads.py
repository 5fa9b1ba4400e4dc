"""Record workloads the broker is fed, and Kafka's compaction rule applied to what it served, so a test can
say which records a compacted log keeps."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

from tests.kafka.clients import ConsumedRecord, ProducedRecord

__all__ = ["SEGMENT_MS", "keyed_chunks", "kept_by_compaction", "kept_by_second_clean"]

SEGMENT_MS = 500
"""``segment.ms`` of the tests' topics. Chunks are stamped 1 s apart, so each chunk opens a new segment:
Kafka rolls when a batch's timestamp is ``segment.ms`` past the segment's first (``LogSegment.shouldRoll``).
Kafka 4.x refuses ``segment.bytes`` below 1 MiB, which would make the tests slow."""
CHUNK_SPACING_MS = 1000


def keyed_chunks(
    *,
    chunks: int = 6,
    records_per_chunk: int = 80,
    keys: int = 30,
    tombstone_share: float = 0.1,
    seed: int = 0,
    start_ms: int | None = None,
    partitions: int = 1,
) -> list[list[ProducedRecord]]:
    """Keyed records with random values, some tombstones and, on every third record, two headers (one with
    a null value); chunk i is stamped ``start_ms + i`` seconds. ``start_ms`` defaults to now: transaction
    markers carry the broker's clock, and an older first chunk would keep later ones from rolling."""
    rng = random.Random(seed)
    start = start_ms if start_ms is not None else int(time.time() * 1000)
    out: list[list[ProducedRecord]] = []
    for chunk in range(chunks):
        records = []
        for i in range(records_per_chunk):
            key = b"key-%d" % rng.randrange(keys)
            value = None if rng.random() < tombstone_share else rng.randbytes(rng.randrange(20, 200))
            headers: tuple[tuple[str, bytes | None], ...] = (
                (("trace", b"%d-%d" % (chunk, i)), ("empty", None)) if i % 3 == 0 else ()
            )
            records.append(
                ProducedRecord(
                    key=key,
                    value=value,
                    timestamp_ms=start + chunk * CHUNK_SPACING_MS + i,
                    partition=rng.randrange(partitions),
                    headers=headers,
                )
            )
        out.append(records)
    return out


def kept_by_compaction(
    records: Sequence[ConsumedRecord], first_uncleanable_offset: int
) -> list[ConsumedRecord]:
    """Kafka's rule for a first clean of one partition (``Cleaner.shouldRetainRecord``): below the first
    uncleanable offset only the last record of each key stays, tombstones included (their delete horizon
    starts at this clean, KIP-534); from it on, everything stays."""
    last_offset: dict[bytes | None, int] = {}
    for record in records:
        if record.offset < first_uncleanable_offset:
            last_offset[record.key] = record.offset
    return [r for r in records if r.offset >= first_uncleanable_offset or last_offset[r.key] == r.offset]


def kept_by_second_clean(
    records: Sequence[ConsumedRecord], first_end: int, second_end: int
) -> list[ConsumedRecord]:
    """Kafka's rules for a second clean of one partition whose topic has ``delete.retention.ms=0``: the
    first cleaned ``[0, first_end)``, the second cleans ``[first_end, second_end)`` with the first's
    survivors. A record below ``second_end`` stays if it is its key's last there; a tombstone the first
    clean kept is dropped (its batch's delete horizon, stamped by that clean, has passed), one the second
    clean sees first stays (``Cleaner.shouldRetainRecord``, KIP-534)."""
    last_offset: dict[bytes | None, int] = {}
    for record in records:
        if record.offset < second_end:
            last_offset[record.key] = record.offset
    return [
        r
        for r in records
        if r.offset >= second_end
        or (last_offset[r.key] == r.offset and (r.value is not None or r.offset >= first_end))
    ]

"""The cleaner's key map (Kafka ``OffsetMap``/``SkimpyOffsetMap``) and how a round builds it.

Kafka keeps a 24-byte slot per key (MD5 of the key + offset) in a fixed buffer, so keys can collide and a
round maps at most ``slots × load factor`` keys. Here the map holds the exact key bytes (in the C table of
``cleaner._native`` when it is built, else a dict): no collision can merge two keys and a round maps the
whole dirty section. With the C table, a run of plain batches (header, CRC, records) is mapped in one C call
per read chunk (``_map_segment_native``), and any other data batch's keys in one call (``_map_native``).
While every key comes from such a scan in offset order, the C map also keeps a bit per offset of the dirty
section, set when the key of the record at that offset is put again later: the filter of plain batches then
reads "superseded" from it instead of looking each key up a second time (a put from Python turns it off).
With a spare core the C scan parses and the table's puts run on a thread of the map's own
(``native.puts_on_own_thread``): the two halves of a map build take about the same time, so the build takes
about half as long, and the puts keep their order, so the map is the same.
``kafka_utilization_percent`` still reports what Kafka's buffer would have held, for the
``max-buffer-utilization-percent`` gauge.
``build_offset_map`` takes an optional ``max_entries`` to reproduce Kafka's partial rounds (a full map
stops the round early; the next round starts where it stopped), which Kafka's own tests rely on, and an
optional ``budget`` (``key_map_budget.py``): the thread's share of the dedupe buffer bounds the C map, which
beyond it spills to disk and still maps the whole dirty section, exactly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from cleaner.compaction.key_map_budget import KeyMapBudget
from cleaner.compaction.segment_chunks import RUN_BYTES, SegmentChunks
from cleaner.compaction.stats import CleanerStats
from cleaner.compaction.txn_metadata import CleanedTransactionMetadata, collect_aborted_txns
from cleaner.native import (
    FALLBACK,
    NativeKeyMap,
    finish_spill,
    is_spilling,
    new_native_key_map,
    puts_on_own_thread,
    spill_probe_records,
)
from service.base.errors import corrupt_data_in
from service.storage.records import RecordBatch
from service.storage.segment import LogSegment

__all__ = [
    "CHUNK_BYTES",
    "KAFKA_BYTES_PER_ENTRY",
    "OffsetMap",
    "ReadPacer",
    "build_offset_map",
    "kafka_utilization_percent",
    "map_data_batch",
    "segments_overlapping",
]

logger = logging.getLogger(__name__)

KAFKA_BYTES_PER_ENTRY = 24  # SkimpyOffsetMap: 16-byte MD5 digest + 8-byte offset
CHUNK_BYTES = 256 * 1024  # Kafka's default read buffer per cleaner thread (io.buffer.size / 2)
_INT32_MAX = (1 << 31) - 1


class ReadPacer:
    """Abort checks and throttling once per ``CHUNK_BYTES`` read, as Kafka does once per read buffer.

    ``read(n)`` counts bytes; when a chunk's worth accumulated it runs the abort check (which raises
    ``CleaningAbortedError``) and hands the bytes to the throttler. ``flush`` settles the remainder.
    """

    __slots__ = ("_check_aborted", "_pending", "_throttle")

    def __init__(self, check_aborted: Callable[[], None], throttle: Callable[[int], None]) -> None:
        self._check_aborted = check_aborted
        self._throttle = throttle
        self._pending = 0

    def check(self) -> None:
        self._check_aborted()

    def read(self, size_bytes: int) -> None:
        self._pending += size_bytes
        if self._pending >= CHUNK_BYTES:
            self.flush()

    def written(self, size_bytes: int) -> None:
        self.read(size_bytes)

    def flush(self) -> None:
        pending, self._pending = self._pending, 0
        self._check_aborted()
        if pending:
            self._throttle(pending)


class OffsetMap:
    """Exact key bytes → the latest offset seen for that key in the dirty section.

    ``latest_offset`` is the last offset the map covers (Kafka ``latestOffset``): ``put`` moves it to the
    record's offset and ``update_latest_offset`` past gaps and whole batches. Records above it were not
    looked at by this round and are always kept. Owned by one round on one thread: no lock. ``native=False``
    keeps the keys in a dict (the pure-Python path, also under ``LOGCLEANER_PURE_PYTHON=1``).
    """

    __slots__ = ("_entries", "_latest_offset", "_native", "spill_classes")

    def __init__(self, *, native: bool = True) -> None:
        self._entries: dict[bytes, int] = {}
        self._native = new_native_key_map() if native else None
        self._latest_offset = -1
        self.spill_classes = 0  # the classes a bounded map spilled to (0: it stayed in memory)

    def put(self, key: bytes, offset: int) -> None:
        if self._native is not None:
            self._native.put(key, offset)
        else:
            self._entries[key] = offset
        self._latest_offset = offset

    def get(self, key: bytes) -> int:
        """The key's latest offset, or -1 if the dirty section does not hold it (nothing supersedes it)."""
        if self._native is not None:
            return self._native.get(key)
        return self._entries.get(key, -1)

    @property
    def lookup(self) -> Callable[[bytes], int]:
        """``get``, as the C map's own method when there is one (``rules.filter_batch`` then stays in C)."""
        return self._native.get if self._native is not None else self.get

    @property
    def native(self) -> NativeKeyMap | None:
        return self._native

    def entries(self) -> Mapping[bytes, int]:
        """Every key and its offset, for a pure-Python map (a C map lists none: ``dump_key_map`` it)."""
        if self._native is not None:
            raise RuntimeError("a C key map has no dict of entries")
        return self._entries

    def update_latest_offset(self, offset: int) -> None:
        self._latest_offset = offset

    def clear(self) -> None:
        self._entries.clear()
        if self._native is not None:
            self._native.clear()
        self._latest_offset = -1
        self.spill_classes = 0

    @property
    def latest_offset(self) -> int:
        return self._latest_offset

    @property
    def size(self) -> int:
        return len(self._native) if self._native is not None else len(self._entries)

    def kafka_utilization_percent(self, dedupe_buffer_bytes: int, load_factor: float = 0.9) -> float:
        """What Kafka's SkimpyOffsetMap would have used, in percent (entries / slots × 100).

        ``dedupe_buffer_bytes`` is one thread's share of ``log.cleaner.dedupe.buffer.size`` (capped at
        2^31 − 1 as Kafka caps it); slots = bytes // 24. Kafka's map stops at ``floor(slots × load_factor)``
        entries, so more keys than that count as a full map (Kafka would have needed more rounds).
        """
        return kafka_utilization_percent(self.size, dedupe_buffer_bytes, load_factor)


def kafka_utilization_percent(map_size: int, dedupe_buffer_bytes: int, load_factor: float = 0.9) -> float:
    """``OffsetMap.kafka_utilization_percent`` for ``map_size`` keys mapped elsewhere (e.g. in Spark)."""
    slots = min(dedupe_buffer_bytes, _INT32_MAX) // KAFKA_BYTES_PER_ENTRY
    if slots <= 0:
        return 0.0
    entries = min(map_size, int(slots * load_factor))
    return 100.0 * entries / slots


def segments_overlapping(segments: Sequence[LogSegment], start: int, end: int) -> list[LogSegment]:
    """Kafka ``logSegments(from, to)``: the segment holding ``start`` and every later one below ``end``."""
    if start >= end:
        return []
    out = []
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if segment.base_offset < end and (upper is None or upper > start):
            out.append(segment)
    return out


def build_offset_map(
    segments: Sequence[LogSegment],
    start: int,
    end: int,
    offset_map: OffsetMap,
    stats: CleanerStats,
    *,
    max_entries: int | None = None,
    pacer: ReadPacer | None = None,
    spare_core: bool | None = None,
    budget: KeyMapBudget | None = None,
) -> bool:
    """Map every key of the dirty section [start, end) to its latest offset; True if it filled up (Kafka
    ``Cleaner.buildOffsetMap``).

    Control batches never enter the map (they only drive transaction tracking) and neither does data of
    aborted transactions, whose keys must not shadow older committed values; unkeyed records are ignored.
    After a segment read to its end, ``latest_offset`` jumps to the next segment's base − 1 (or end − 1),
    skipping offset gaps. With no dirty segment (a rewrite-only round, start == end) ``latest_offset`` is
    end − 1: every record below ``end`` was "looked at" and nothing supersedes it. ``spare_core``: see
    ``native.puts_on_own_thread``. ``budget``: the C map's bound (``key_map_budget.py``).
    """
    pacer = pacer or ReadPacer(lambda: None, lambda _bytes: None)
    offset_map.clear()
    dirty = segments_overlapping(segments, start, end)
    if not dirty:
        offset_map.update_latest_offset(end - 1)
        return False
    native = offset_map.native
    if budget is None or native is None or max_entries is not None:
        return _build(segments, dirty, start, end, offset_map, stats, max_entries, pacer, spare_core)
    directory = segments[0].log_path.parent
    bounded = budget.apply(native, directory, segments[0].base_offset, start, end)
    try:
        _build(segments, dirty, start, end, offset_map, stats, None, pacer, spare_core)
        if bounded:
            if is_spilling(native):
                _probe_clean_section(segments, start, native, pacer)
            offset_map.spill_classes = finish_spill(native, segments[0].base_offset)
    except (FALLBACK, OSError) as exc:
        logger.warning(
            "%s: the key map of the round over [%d, %d) cannot stay within %d bytes (%s); building it again "
            "in memory, unbounded",
            directory,
            start,
            end,
            budget.share_bytes,
            exc,
        )
        stats.map_records_read = stats.map_bytes_read = 0
        offset_map.clear()
        return _build(segments, dirty, start, end, offset_map, stats, None, pacer, spare_core)
    return False


def _build(
    segments: Sequence[LogSegment],
    dirty: Sequence[LogSegment],
    start: int,
    end: int,
    offset_map: OffsetMap,
    stats: CleanerStats,
    max_entries: int | None,
    pacer: ReadPacer,
    spare_core: bool | None,
) -> bool:
    """``build_offset_map``'s scan of the dirty segments (the map cleared, ``dirty`` not empty)."""
    txns = CleanedTransactionMetadata()
    txns.add_aborted_transactions(collect_aborted_txns(segments, start, end))
    with puts_on_own_thread(offset_map.native if max_entries is None else None, spare_core=spare_core):
        for i, segment in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if _map_segment(segment, start, offset_map, txns, stats, max_entries, pacer):
                pacer.flush()
                return True
            offset_map.update_latest_offset(next_start - 1)
    pacer.flush()
    return False


def _probe_clean_section(
    segments: Sequence[LogSegment], start: int, native: NativeKeyMap, pacer: ReadPacer
) -> None:
    """Every keyed record below ``start`` probed into the spilled map (``spill_probe_records``): the filter
    asks about them too, and a spilled map answers only from its bitmap. Control batches hold no keys the
    filter looks up."""
    for segment in segments_overlapping(segments, segments[0].base_offset, start):
        pacer.check()
        with corrupt_data_in(segment.log_path):
            for batch in segment.batches(0, verify_crc=True):
                if batch.base_offset >= start:
                    break
                pacer.read(batch.size_bytes)
                if not batch.is_control and batch.records_count:
                    spill_probe_records(
                        native, batch.records_bytes(), batch.records_count, batch.base_offset, start
                    )
    pacer.flush()


def _map_segment(
    segment: LogSegment,
    start: int,
    offset_map: OffsetMap,
    txns: CleanedTransactionMetadata,
    stats: CleanerStats,
    max_entries: int | None,
    pacer: ReadPacer,
) -> bool:
    """Kafka ``buildOffsetMapForSegment``: True as soon as the map is full (the segment is partly mapped)."""
    pacer.check()
    position = segment.offset_index.lookup(start).position
    native = offset_map.native
    with corrupt_data_in(segment.log_path):
        if native is not None and max_entries is None:
            _map_segment_native(segment, position, start, native, offset_map, txns, stats, pacer)
            return False
        for batch in segment.batches(position, verify_crc=True):
            if _map_batch(batch, start, offset_map, txns, stats, max_entries, pacer):
                return True
    return False


def _map_batch(
    batch: RecordBatch,
    start: int,
    offset_map: OffsetMap,
    txns: CleanedTransactionMetadata,
    stats: CleanerStats,
    max_entries: int | None,
    pacer: ReadPacer,
) -> bool:
    """One batch of ``_map_segment``, by the Python rules; True if the map filled up."""
    pacer.read(batch.size_bytes)
    if batch.is_control:
        txns.on_control_batch_read(batch)
        stats.map_records_read += 1
    elif txns.on_batch_read(batch):
        stats.map_records_read += batch.records_count
    elif max_entries is None:
        map_data_batch(batch, start, offset_map, stats)
    else:
        for record in batch.records():
            if record.key is not None and record.offset >= start:
                if max_entries is not None and offset_map.size >= max_entries:
                    return True
                offset_map.put(record.key, record.offset)
            stats.map_records_read += 1
    if batch.last_offset >= start:
        offset_map.update_latest_offset(batch.last_offset)
    stats.map_bytes_read += batch.size_bytes
    return False


def map_data_batch(batch: RecordBatch, start: int, offset_map: OffsetMap, stats: CleanerStats) -> None:
    """The keyed records at or above ``start`` of one data batch outside any aborted transaction, into the
    map (no cap): in C when it can, else by the Python loop."""
    if _map_native(batch, start, offset_map, stats):
        return
    for record in batch.records():
        if record.key is not None and record.offset >= start:
            offset_map.put(record.key, record.offset)
        stats.map_records_read += 1


def _map_segment_native(
    segment: LogSegment,
    position: int,
    start: int,
    native: NativeKeyMap,
    offset_map: OffsetMap,
    txns: CleanedTransactionMetadata,
    stats: CleanerStats,
    pacer: ReadPacer,
) -> None:
    """``_map_segment`` with runs of data batches and transaction markers mapped in C, CRC included, a read
    chunk's worth per call, the aborted transactions tracked as ``_map_batch`` tracks them (the map ignores
    what only the markers' verdicts depend on: the ongoing committed producers); every other batch goes
    through ``_map_batch``."""
    cursor = txns.native_cursor()
    with SegmentChunks(segment, position) as chunks:
        while chunks.has_more:
            buf, at = chunks.chunk()
            reached, batches, records, size_bytes, _last_offset, latest = native.map_batches(
                buf, at, at + RUN_BYTES, start, cursor.cells
            )
            if batches:
                pacer.read(size_bytes)
                if latest >= 0:
                    offset_map.update_latest_offset(latest)
                stats.map_records_read += records
                stats.map_bytes_read += size_bytes
                chunks.position = chunks.buffer_start + reached
                continue
            batch = chunks.batch_here()  # the batch C left: Python's, errors included
            txns.take_native(cursor)
            _map_batch(batch, start, offset_map, txns, stats, None, pacer)
            cursor = txns.native_cursor()
            chunks.position += batch.size_bytes
    txns.take_native(cursor)


def _map_native(batch: RecordBatch, start: int, offset_map: OffsetMap, stats: CleanerStats) -> bool:
    """Map one data batch's keys in C; False (nothing counted) when the Python loop must do it."""
    native = offset_map.native
    if native is None or batch.records_count == 0:
        return False
    try:
        read, last_put = native.map_records(
            batch.records_bytes(), batch.records_count, batch.base_offset, start
        )
    except FALLBACK:
        return False  # the keys it put are put again, in the same order, by the Python loop
    if last_put >= 0:
        offset_map.update_latest_offset(last_put)
    stats.map_records_read += read
    return True

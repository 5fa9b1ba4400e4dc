"""The C path for the cleaner's per-record work (``cleaner/native/``), behind the Python rules.

``KeyMap`` holds the round's key map without a Python object per key; ``map_records`` fills it from one
batch's records area and ``filter_records`` applies the record rules of ``rules.filter_batch`` to one
batch and re-encodes the survivors; ``KeyMap.map_batches`` and ``filter_batches`` do the same for a whole
run of data batches in a read chunk (compressed or not, with a producer id or not, transactional or not,
transaction markers too, the transaction state tracked as the Python rules track it), batch headers and
CRC-32C included, so such a run costs one call and
no Python object but a compressed batch's bytes (for the records the map build put, the filter reads
"superseded" from the map's bitmap rather than looking the key up again); ``scan_producer_headers`` reads
only the batch headers of a segment for ``rules.ProducerScan``. All release the GIL. Codec work stays in
the codec libraries: the system's liblz4 and libzstd decompress where present, else the C loops call
``service.storage.compression``'s ``decompress``; they compress with its ``compress``, or for lz4 and zstd
with the C function behind it (the same libraries), as the Python rules do.
Anything the C code does not handle exactly (an odd encoding, a key map that is not native, an empty
batch) comes back as None or ``Fallback``, or is left to the caller, who runs the Python rules, which stay
the oracle. ``LOGCLEANER_PURE_PYTHON=1``, or an install without a compiler, leaves only the Python rules.
"""

from __future__ import annotations

import array
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from service.core.cpus import usable_cpus
from service.storage.compression import CompressionType, compress, decompress, system_codecs
from service.storage.native_module import load_native_module
from service.storage.records import (
    BATCH_HEADER,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RecordBatch,
    TimestampType,
    crc32c_of,
)

__all__ = [
    "FALLBACK",
    "Fallback",
    "NativeKeyMap",
    "Writeback",
    "cleaning_round",
    "defer_key_map",
    "dump_key_map",
    "dump_key_map_to",
    "dump_superseded_bits",
    "encode_rebuilt_batch",
    "filter_batches",
    "filter_records",
    "finish_spill",
    "has_native",
    "is_spilling",
    "key_class",
    "load_key_map",
    "native_key_map",
    "new_native_key_map",
    "or_superseded_bits",
    "producer_ends",
    "puts_on_own_thread",
    "puts_pipelined",
    "scan_batch_runs",
    "scan_producer_headers",
    "set_key_class",
    "skip_batch_checks",
    "spill_key_map",
    "spill_probe_records",
    "take_spilled_bits",
]

_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_DELETE_HORIZON_BIT = 0x40


class NativeKeyMap(Protocol):
    """``cleaner._native.KeyMap``: exact key bytes → latest offset."""

    def map_records(self, raw: bytes, count: int, base_offset: int, start: int) -> tuple[int, int]: ...

    def map_batches(
        self,
        buf: bytes | memoryview,
        position: int,
        limit: int,
        start: int,
        txns: array.array[int] | None = None,
        aborted: array.array[int] | None = None,
    ) -> tuple[int, int, int, int, int, int]: ...

    def get(self, key: bytes) -> int: ...

    def put(self, key: bytes, offset: int) -> None: ...

    def superseded(self, key: bytes, offset: int) -> bool: ...

    def clear(self) -> None: ...

    def start_pipeline(self) -> bool: ...

    def finish_pipeline(self) -> None: ...

    def __len__(self) -> int: ...


_native = load_native_module("cleaner._native")
if _native is not None:
    # the C loops decompress and re-compress through the very functions the Python rules call (for lz4 and
    # zstd, the C function behind ``compress``, called without the GIL)
    _native.set_codecs(decompress, compress, tuple(CompressionType), system_codecs())


class Fallback(Exception):
    """Never raised: stands in for ``_native.Fallback`` when the module is not built."""


FALLBACK: type[Exception] = Fallback if _native is None else _native.Fallback


def has_native() -> bool:
    """True when the C module is in use (built, and ``LOGCLEANER_PURE_PYTHON`` not set)."""
    return _native is not None


def new_native_key_map() -> NativeKeyMap | None:
    """A fresh C key map, or None when the native module is not in use."""
    return None if _native is None else _native.KeyMap()


_CORES = usable_cpus()  # the affinity mask, capped by a container's CPU quota
_rounds_running = 0  # this process's cleaning rounds at this moment (``cleaning_round``)
_rounds_lock = threading.Lock()


def puts_pipelined() -> bool:
    """Whether a map's puts can run on a thread of their own here (C, and more than one core)."""
    return _native is not None and _CORES > 1


@contextmanager
def cleaning_round() -> Iterator[None]:
    """Counts the rounds this process runs at once (``log.cleaner.threads``): a map's puts take a thread of
    their own only while fewer rounds than cores run (``puts_on_own_thread``)."""
    global _rounds_running
    with _rounds_lock:
        _rounds_running += 1
    try:
        yield
    finally:
        with _rounds_lock:
            _rounds_running -= 1


@contextmanager
def puts_on_own_thread(key_map: NativeKeyMap | None, *, spare_core: bool | None = None) -> Iterator[None]:
    """While a scan in offset order builds ``key_map``, its puts run on a thread of the map's own
    (``start_pipeline``): the table's cache misses, half of a map's time, then overlap the parsing of the
    next read chunk. The puts keep their order, so the map (and its superseded bitmap) is the same.
    ``spare_core``: whether a core is free for that thread (default: fewer rounds run than there are
    cores). Nothing changes without C or on one core."""
    if spare_core is None:
        spare_core = _rounds_running < _CORES
    if key_map is None or not spare_core or not puts_pipelined() or not key_map.start_pipeline():
        yield
        return
    try:
        yield
    finally:
        key_map.finish_pipeline()


def spill_key_map(key_map: NativeKeyMap, budget_bytes: int, directory: Path, upper_bound: int) -> None:
    """Hold the empty ``key_map``'s table and key arena within ``budget_bytes``: beyond it, its scan's puts
    go to class files in ``directory`` (nameless, or unlinked at once: ``native/spill.c``)."""
    if _native is None:
        raise RuntimeError("spill_key_map needs cleaner._native")
    _native.spill_key_map(key_map, budget_bytes, os.fspath(directory), upper_bound)


def is_spilling(key_map: NativeKeyMap) -> bool:
    """Whether ``key_map`` passed its budget and spilled its scan's puts."""
    return _native is not None and bool(_native.is_spilling(key_map))


def spill_probe_records(key_map: NativeKeyMap, raw: bytes, count: int, base_offset: int, below: int) -> None:
    """Probe the keyed records below ``below`` of one records area of the clean section (``finish_spill``
    gives each its bit); ``FALLBACK`` for an area the C parser does not read."""
    if _native is None:
        raise RuntimeError("spill_probe_records needs cleaner._native")
    _native.spill_probe_records(key_map, raw, count, base_offset, below)


def finish_spill(key_map: NativeKeyMap, first_offset: int) -> int:
    """Replay a spilled map's classes one at a time into its bitmap, which then answers for every offset from
    ``first_offset`` on (the map holds no table after); the number of classes, 0 if it never spilled.
    ``FALLBACK`` or ``OSError``: the map cannot answer so and must be built again without a budget."""
    if _native is None:
        return 0
    return int(_native.finish_spill(key_map, first_offset))


def take_spilled_bits(key_map: NativeKeyMap, bits: bytes | memoryview, keys: int) -> None:
    """Make the empty ``key_map`` answer only from a spilled map's bitmap (``dump_superseded_bits`` after
    ``finish_spill``), as that map does: a Spark task's lookup from the file another task's map left."""
    if _native is None:
        raise RuntimeError("take_spilled_bits needs cleaner._native")
    _native.take_spilled_bits(key_map, bits, keys)


def native_key_map(lookup: Callable[[bytes], int]) -> NativeKeyMap | None:
    """The C key map behind ``lookup`` when it is a ``KeyMap``'s ``get`` (what ``OffsetMap.lookup`` hands
    out), else None: then the records go through the Python rules, which call ``lookup``."""
    if _native is None:
        return None
    owner = getattr(lookup, "__self__", None)
    return owner if isinstance(owner, _native.KeyMap) else None


def dump_key_map(key_map: NativeKeyMap) -> bytes:
    """Every (key, offset) entry of a C key map as one blob: per entry the key's length (uint32) and the
    offset (int64), little-endian, then the key bytes (``cleaner.spark.partial_maps`` writes the same form
    without C)."""
    if _native is None:
        raise RuntimeError("dump_key_map needs cleaner._native")
    return _native.dump_key_map(key_map)  # type: ignore[no-any-return]


def dump_key_map_to(key_map: NativeKeyMap, fd: int, position: int) -> int:
    """``dump_key_map``'s blob written into the file ``fd`` from ``position`` on, from a reused buffer (no
    blob object of the map's size); the bytes written."""
    if _native is None:
        raise RuntimeError("dump_key_map_to needs cleaner._native")
    return _native.dump_key_map_to(key_map, fd, position)  # type: ignore[no-any-return]


def load_key_map(key_map: NativeKeyMap, blob: bytes | memoryview) -> None:
    """Put every entry of a ``dump_key_map`` blob into ``key_map`` (a key already there takes the blob's
    offset); ``ValueError`` if the blob is cut short."""
    if _native is None:
        raise RuntimeError("load_key_map needs cleaner._native")
    _native.load_key_map(key_map, blob)


def dump_superseded_bits(key_map: NativeKeyMap) -> bytes | None:
    """The superseded bitmap of a C key map built by a scan in offset order (its first and last put's
    offsets, then the bits), or None when it keeps none (``cleaner.spark.partial_maps`` moves it with the
    map's blob)."""
    if _native is None:
        raise RuntimeError("dump_superseded_bits needs cleaner._native")
    return _native.dump_superseded_bits(key_map)  # type: ignore[no-any-return]


def set_key_class(key_map: NativeKeyMap, key_class_: int, classes: int) -> None:
    """Make an empty C key map take only the keys of hash class ``key_class_`` of ``classes``
    (``key_class``): its scans skip other keys and check only their share of the batches (``key_map.h``:
    the map by key hash)."""
    if _native is None:
        raise RuntimeError("set_key_class needs cleaner._native")
    _native.set_key_class(key_map, key_class_, classes)


def skip_batch_checks(key_map: NativeKeyMap) -> None:
    """Make a C key map's scans read only the keys of plain batches, no CRC or other check: for a map whose
    round checks every batch it maps again before using anything (a Spark round: its tasks rewrite every
    batch and the driver swaps only after they all succeeded). Not for the in-process round, which swaps
    each group as it goes: there a corrupt batch must fail the map, before the first swap."""
    if _native is None:
        raise RuntimeError("skip_batch_checks needs cleaner._native")
    _native.skip_batch_checks(key_map)


def key_class(key: bytes, classes: int) -> int:
    """The hash class of ``key`` among ``classes``: from the C key map's hash, computed in Python without C
    (the same value: a map task without C and a rewrite task with it agree)."""
    if _native is not None:
        return _native.key_class(key, classes)  # type: ignore[no-any-return]
    return ((_hash_bytes(key) >> 32) * classes) >> 32


_MASK64 = (1 << 64) - 1


def _hash_bytes(key: bytes) -> int:
    """``hash_bytes`` of ``native/key_map.h`` (64-bit words read little-endian)."""
    h = 0xCBF29CE484222325 ^ len(key)
    whole = len(key) - len(key) % 8
    for i in range(0, whole, 8):
        h = ((h ^ int.from_bytes(key[i : i + 8], "little")) * 0x100000001B3) & _MASK64
        h ^= h >> 29
    for byte in key[whole:]:
        h = ((h ^ byte) * 0x100000001B3) & _MASK64
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _MASK64
    return h ^ (h >> 33)


def or_superseded_bits(key_map: NativeKeyMap, bits: bytes | memoryview | None) -> None:
    """OR one key class's ``dump_superseded_bits`` bitmap into ``key_map``'s (None: that class's map kept
    none, so neither does ``key_map``); ``ValueError`` if it is not a bitmap."""
    if _native is None:
        raise RuntimeError("or_superseded_bits needs cleaner._native")
    _native.or_superseded_bits(key_map, bits)


def defer_key_map(key_map: NativeKeyMap, blob: bytes | memoryview) -> None:
    """``load_key_map`` when ``key_map`` is first read beyond its bitmap (a lookup the bits cannot answer,
    ``get``, ``len``, a dump or a put), keeping the bitmap: for the key classes of the scan the bits are of.
    ``key_map`` holds ``blob`` until then; ``ValueError`` now if the blob is cut short."""
    if _native is None:
        raise RuntimeError("defer_key_map needs cleaner._native")
    _native.defer_key_map(key_map, blob)


def filter_records(
    batch: RecordBatch,
    *,
    key_map: NativeKeyMap,
    map_latest_offset: int,
    now_ms: int,
    new_horizon_ms: int,
    discard_records: bool,
    can_discard: bool,
) -> tuple[bytes | None, int, int, int, int, int, int | None] | None:
    """The C record loop over one batch (see ``_native.filter_records``); None: use the Python rules."""
    if _native is None or batch.records_count == 0:
        return None
    log_append_time = batch.max_timestamp if batch.timestamp_type is TimestampType.LOG_APPEND_TIME else None
    raw = batch.records_bytes()
    try:
        result = _native.filter_records(
            raw,
            batch.records_count,
            batch.base_offset,
            batch.base_timestamp,
            log_append_time,
            key_map,
            map_latest_offset,
            now_ms,
            batch.delete_horizon_ms,
            new_horizon_ms,
            discard_records,
            batch.is_control,
            can_discard,
            not batch.is_control and not batch.is_transactional,
        )
    except _native.Fallback:
        return None
    return result  # type: ignore[no-any-return]


def filter_batches(
    buf: memoryview,
    position: int,
    limit: int,
    key_map: NativeKeyMap,
    map_latest_offset: int,
    now_ms: int,
    new_horizon_ms: int,
    upper_bound: int,
    out: bytearray | None = None,
    producer_ends: bytes | None = None,
    committed: set[int] | None = None,
    txns: array.array[int] | None = None,
) -> tuple[int, bytes | memoryview, bytes]:
    """The C filter over the run of batches outside transactions at ``buf[position]`` (see
    ``_native.filter_batches``): (position reached, output bytes, per-batch metadata). Given ``out``, the
    output is written into it with the GIL released and comes back as a view of it, valid until ``out`` is
    used again (it must hold twice the bytes of ``buf`` from ``position`` on, plus 64 KiB:
    ``SegmentChunks.output_space``). Batches with a producer id are taken only given ``producer_ends``
    (``producer_ends``: which of them are their producer's last), transactional ones and markers only given
    the transaction state, changed as its methods would change it: ``committed``
    (``CleanedTransactionMetadata.ongoing_committed``) and ``txns`` (its ``native_cursor``'s cells). Only
    called with a C key map (``native_key_map``), so the module is loaded."""
    if _native is None:
        raise RuntimeError("filter_batches needs cleaner._native")
    args = (buf, position, limit, key_map, map_latest_offset, now_ms, new_horizon_ms, upper_bound)
    if out is None:
        return _native.filter_batches(*args, None, producer_ends, committed, txns)  # type: ignore[no-any-return]
    reached, length, meta = _native.filter_batches(*args, out, producer_ends, committed, txns)
    return reached, memoryview(out)[:length], meta


def producer_ends(last_data_offsets: Iterable[tuple[int, int | None]]) -> bytes:
    """The ``producer_ends`` of ``filter_batches`` from (producer id, last data offset or None) pairs, as
    int64 pairs (offset, producer id) sorted by offset: where an active producer's last data batch ends (such
    a batch is kept, as a bare header if none of its records survives), -1 for a producer whose last entry is
    a marker (its markers are left to the Python rules, which keep them by epoch)."""
    pairs = sorted((-1 if offset is None else offset, pid) for pid, offset in last_data_offsets)
    return array.array("q", [value for pair in pairs for value in pair]).tobytes()


def scan_producer_headers(fd: int, position: int, end: int) -> tuple[int, list[int]] | None:
    """The C header scan of ``rules._iter_headers`` (see ``_native.scan_producer_headers``): the position
    reached and, per batch with a producer id, attributes, last offset, producer id, epoch (flat), a run of
    one producer's data batches with no marker of its own between them as its last batch's row alone (the
    fold of ``rules._scan_headers`` ends the same); None when the module is not in use."""
    if _native is None:
        return None
    reached, rows = _native.scan_producer_headers(fd, position, end)
    return reached, memoryview(rows).cast("q").tolist()


def scan_batch_runs(fd: int, end: int, split: int) -> tuple[int, list[int], bytes] | None:
    """The C header scan of ``round_plan.replay_headers`` (see ``_native.scan_batch_runs``): the position
    reached, per row (flat) kind (0 a run of plain batches, 1 another batch), position, bytes, last offset,
    records, and the 61-byte header of each kind-1 row; runs do not cross ``split`` (-1: none). None without
    the module."""
    if _native is None:
        return None
    reached, rows, headers = _native.scan_batch_runs(fd, end, split)
    return reached, memoryview(rows).cast("q").tolist(), headers


WRITEBACK_BYTES = 8 << 20


class Writeback:
    """Has the kernel start writing a growing file to disk every ``WRITEBACK_BYTES`` appended
    (``_native.start_writeback``), so that the fsync sealing it waits only for the last stretch. A hint: the
    fsync still makes the file durable, with or without it."""

    __slots__ = ("_fd", "_started")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._started = 0

    @classmethod
    def open(cls, path: Path) -> Writeback | None:
        """None without the C module (then the fsync does all the writing)."""
        if _native is None:
            return None
        return cls(os.open(path, os.O_RDONLY | os.O_CLOEXEC))

    def written(self, size_bytes: int) -> None:
        """The file is ``size_bytes`` long now."""
        if _native is not None and size_bytes - self._started >= WRITEBACK_BYTES:
            _native.start_writeback(self._fd, self._started, size_bytes - self._started)
            self._started = size_bytes

    def close(self) -> None:
        os.close(self._fd)


def encode_rebuilt_batch(
    batch: RecordBatch,
    area: bytes,
    *,
    records_count: int,
    base_timestamp: int,
    max_timestamp: int,
    delete_horizon_ms: int | None,
) -> bytes:
    """The survivors' records area as one batch, with the header ``records.encode_batch`` would write."""
    if batch.compression is not CompressionType.NONE:
        area = compress(batch.compression, area)
    attributes = int(batch.compression) | (int(batch.timestamp_type) << 3)
    if batch.is_transactional:
        attributes |= _TRANSACTIONAL_BIT
    if batch.is_control:
        attributes |= _CONTROL_BIT
    if delete_horizon_ms is not None:
        attributes |= _DELETE_HORIZON_BIT
    size = RECORD_BATCH_OVERHEAD + len(area)
    header = bytearray(
        BATCH_HEADER.pack(
            batch.base_offset,
            size - LOG_OVERHEAD,
            batch.partition_leader_epoch,
            CURRENT_MAGIC,
            0,
            attributes,
            batch.last_offset_delta,
            base_timestamp,
            max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            records_count,
        )
    )
    crc = crc32c_of(area, crc32c_of(header[21:]))
    header[17:21] = crc.to_bytes(4, "big")
    return bytes(header) + area

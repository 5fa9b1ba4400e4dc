"""The C path (``cleaner/native/``) against the Python rules, its oracle: random logs cleaned both ways
must come out byte for byte the same, and ``LOGCLEANER_PURE_PYTHON=1`` must leave only the Python rules."""

from __future__ import annotations

import contextlib
import gzip
import os
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import crc32c
import lz4.frame  # type: ignore[import-untyped]  # python-lz4 ships no type hints
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cleaner.compaction.cleaner
import cleaner.compaction.offset_map
import cleaner.compaction.rules
import cleaner.native
from cleaner.compaction.offset_map import OffsetMap, build_offset_map
from cleaner.compaction.oracle import clean_in_process
from cleaner.compaction.stats import CleanerStats
from cleaner.compaction.txn_metadata import CleanedTransactionMetadata
from service.base.clock import ManualClock
from service.base.errors import CorruptDataError
from service.core.cpus import usable_cpus
from service.shell.tools.gen import encode_records_area
from service.storage import compression as compression_module
from service.storage.compression import CompressionType, compress, decompress, system_codecs
from service.storage.control import encode_end_txn_marker_batch
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import (
    RECORD_BATCH_OVERHEAD,
    Header,
    Record,
    RecordBatch,
    TimestampType,
    encode_batch,
    iter_batches,
)
from service.storage.segment import LogSegment
from service.storage.txn_index import AbortedTxn, decode_entries
from tests.cleaner.helpers import DAY_MS, Producer, compact_config, legacy_message
from tests.paths import REPO

pytestmark = pytest.mark.skipif(cleaner.native._native is None, reason="cleaner._native is not built")

KEYS = [b"a", b"b", b"c", b"twelve-bytes", b"longer-than-the-twelve-inline-bytes", b""]
PRODUCERS = [1, 2, 3]
IDEMPOTENT = [7, 8]  # producers outside transactions: their batches carry a producer id and sequences
START = 1_400_000_000_000


class Op(NamedTuple):
    kind: str  # put, idem (an idempotent producer's batch), txn, end (commit or abort), roll
    producer_id: int = 0
    records: tuple[Record, ...] = ()
    commit: bool = True


headers = st.lists(
    st.builds(Header, st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=4))), max_size=2
).map(tuple)
records = st.builds(
    Record,
    st.just(0),
    st.integers(min_value=START - DAY_MS, max_value=START + DAY_MS),
    st.one_of(st.none(), st.sampled_from(KEYS)),
    st.one_of(st.none(), st.binary(min_size=0, max_size=8)),
    headers,
)
operations = st.lists(
    st.one_of(
        st.builds(Op, st.just("put"), st.just(0), st.lists(records, min_size=1, max_size=4).map(tuple)),
        st.builds(
            Op,
            st.just("idem"),
            st.sampled_from(IDEMPOTENT),
            st.lists(records, min_size=1, max_size=4).map(tuple),
        ),
        st.builds(
            Op,
            st.just("txn"),
            st.sampled_from(PRODUCERS),
            st.lists(records, min_size=1, max_size=3).map(tuple),
        ),
        st.builds(Op, st.just("end"), st.sampled_from(PRODUCERS), commit=st.booleans()),
        st.just(Op("roll")),
    ),
    min_size=1,
    max_size=25,
)
codecs = st.sampled_from(list(CompressionType))
timestamp_types = st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME])


def build(
    directory: Path, ops: list[Op], codec: CompressionType, timestamp_type: TimestampType
) -> PartitionLog:
    directory.mkdir(parents=True)
    # built as a delete-policy log, so that keyless records (invalid when compacted) can be written
    config = LogConfig(segment_bytes=600, message_timestamp_type=timestamp_type)
    log = load_partition_log(directory, config, clock=ManualClock(START)).log
    producers = {pid: Producer(log, pid) for pid in PRODUCERS + IDEMPOTENT}
    open_txns: set[int] = set()
    for op in ops:
        if op.kind == "put":
            log.append_records(list(op.records), compression=codec)
        elif op.kind in ("idem", "txn"):
            producer = producers[op.producer_id]
            log.append_records(
                list(op.records),
                compression=codec,
                producer_id=op.producer_id,
                producer_epoch=0,
                base_sequence=producer.sequence,
                is_transactional=op.kind == "txn",
            )
            producer.sequence += len(op.records)
            if op.kind == "txn":
                open_txns.add(op.producer_id)
        elif op.kind == "end" and op.producer_id in open_txns:
            open_txns.discard(op.producer_id)
            producer = producers[op.producer_id]
            producer.commit() if op.commit else producer.abort()
        elif op.kind == "roll":
            log.roll()
    log.roll()  # transactions still open stay open: the cleaner must stop below them
    return log


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def clean_three_times(directory: Path) -> list[dict[str, bytes]]:
    """A round, a rewrite-only round (markers get their horizon), one a day later (tombstones go)."""
    log = load_partition_log(directory, compact_config(), clock=ManualClock(START)).log
    upper = log.active_segment.base_offset
    seen = []
    for first_dirty, now_ms in [(0, START), (upper, START), (upper, START + DAY_MS)]:
        clean_in_process(log, first_dirty, upper, now_ms)
        seen.append(files(directory))
    return seen


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations, codec=codecs, timestamp_type=timestamp_types)
def test_native_output_is_byte_identical_to_the_python_rules(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[Op],
    codec: CompressionType,
    timestamp_type: TimestampType,
) -> None:
    root = tmp_path_factory.mktemp("native")
    build(root / "native" / "topic-0", ops, codec, timestamp_type)
    shutil.copytree(root / "native", root / "python")

    native = clean_three_times(root / "native" / "topic-0")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cleaner.native, "_native", None)
        python = clean_three_times(root / "python" / "topic-0")

    assert native == python


def test_a_round_uses_the_c_key_map_unless_pure_python_is_asked_for() -> None:
    script = "from cleaner.compaction.offset_map import OffsetMap; print(OffsetMap().native is not None)"
    for env, expected in [({}, "True"), ({"LOGCLEANER_PURE_PYTHON": "1"}, "False")]:
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), **env},
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout.strip() == expected


def test_odd_encodings_fall_back_to_the_python_rules() -> None:
    """A varint longer than it needs to be is valid Kafka but not what the encoder writes: Fallback."""
    native = cleaner.native._native
    assert native is not None
    key_map = native.KeyMap()
    # one record: length 8, attributes, ts delta 0, offset delta 0 as a two-byte varint, key "k", no value
    raw = bytes([16, 0, 0, 0x80, 0x00, 2, ord("k"), 1, 0])
    with pytest.raises(native.Fallback):
        key_map.map_records(raw, 1, 0, 0)
    canonical = bytes([14, 0, 0, 0, 2, ord("k"), 1, 0])
    assert key_map.map_records(canonical, 1, 100, 0) == (1, 100)
    assert key_map.get(b"k") == 100 and len(key_map) == 1


def test_the_key_map_keeps_every_key_through_its_growth() -> None:
    native = cleaner.native._native
    assert native is not None
    key_map = native.KeyMap()
    keys = [b"k%d" % i + b"x" * (i % 40) for i in range(20_000)]  # inline (<= 12 bytes) and in the arena
    for offset, key in enumerate(keys):
        key_map.put(key, offset)
    key_map.put(keys[7], 99_999)
    assert len(key_map) == len(keys)
    assert [key_map.get(k) for k in keys[:10]] == [0, 1, 2, 3, 4, 5, 6, 99_999, 8, 9]
    assert all(key_map.get(k) == i for i, k in enumerate(keys) if i != 7)
    assert key_map.get(b"absent") == -1 and key_map.get(b"k1xx") == -1  # k1 has one x
    key_map.clear()
    assert len(key_map) == 0 and key_map.get(keys[0]) == -1


def test_the_key_map_keeps_every_key_while_it_grows_in_place() -> None:
    """From 2 MiB of slots (65,536) the table doubles where it is: 300,000 keys take it through three such
    doublings (to 524,288 slots), with keys put again and clusters that wrap round the table's end."""
    native = cleaner.native._native
    assert native is not None
    rng = random.Random(10)
    key_map = native.KeyMap()
    keys = [rng.randbytes(rng.choice((0, 3, 9, 14, 30))) + b"%d" % i for i in range(300_000)]
    latest: dict[bytes, int] = {}
    for offset in range(450_000):
        key = keys[offset] if offset < len(keys) else keys[rng.randrange(len(keys))]
        key_map.put(key, offset)
        latest[key] = offset
    assert len(key_map) == len(latest)
    assert all(key_map.get(k) == v for k, v in latest.items())
    assert all(key_map.get(b"absent-%d" % i) == -1 for i in range(10_000))
    copy = native.KeyMap()
    native.load_key_map(copy, native.dump_key_map(key_map))
    assert len(copy) == len(latest) and all(copy.get(k) == v for k, v in latest.items())


# -- the key map build in C: batch iteration, CRC-32C and records, one call per run of plain batches --------


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
def test_crc32c_in_c_matches_the_crc32c_package(data: bytes) -> None:
    native = cleaner.native._native
    assert native is not None
    assert native.crc32c(data) == native.crc32c_by_table(data) == crc32c.crc32c(data)


def build_map(
    log: PartitionLog, start: int, *, native: bool, spare_core: bool | None = None
) -> tuple[OffsetMap, CleanerStats]:
    offset_map, stats = OffsetMap(native=native), CleanerStats()
    build_offset_map(
        log.segments, start, log.active_segment.base_offset, offset_map, stats, spare_core=spare_core
    )
    return offset_map, stats


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=operations,
    codec=codecs,
    pick=st.integers(0, 99),
)
def test_the_c_key_map_build_equals_the_python_one(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Op], codec: CompressionType, pick: int
) -> None:
    """Also: the C map built with its puts handed to the map's own thread is the one built putting them on
    the scan's thread (the same table byte for byte, the same superseded bitmap, latest offset, counts)."""
    log = build(tmp_path_factory.mktemp("map") / "topic-0", ops, codec, TimestampType.CREATE_TIME)
    start = pick * log.active_segment.base_offset // 100  # a first dirty offset anywhere in the log
    in_c, c_stats = build_map(log, start, native=True, spare_core=True)
    on_one_thread, one_thread_stats = build_map(log, start, native=True, spare_core=False)
    assert in_c.native is not None and on_one_thread.native is not None
    assert cleaner.native.dump_key_map(in_c.native) == cleaner.native.dump_key_map(on_one_thread.native)
    assert cleaner.native.dump_superseded_bits(in_c.native) == cleaner.native.dump_superseded_bits(
        on_one_thread.native
    )
    assert (in_c.latest_offset, c_stats) == (on_one_thread.latest_offset, one_thread_stats)
    in_python, python_stats = build_map(log, start, native=False)
    assert in_c.native is not None and in_python.native is None
    assert (in_c.size, in_c.latest_offset) == (in_python.size, in_python.latest_offset)
    assert all(in_c.get(key) == in_python.get(key) for key in KEYS)
    assert (c_stats.map_records_read, c_stats.map_bytes_read) == (
        python_stats.map_records_read,
        python_stats.map_bytes_read,
    )


def plain_log(directory: Path, batches: int = 6) -> list[LogSegment]:
    """A closed log of plain batches in one sealed segment, and that segment as the cleaner reads it."""
    directory.mkdir(parents=True)
    config = compact_config()
    log = load_partition_log(directory, config, clock=ManualClock(START)).log
    for i in range(batches):
        log.append_records([Record(0, START, b"k%d" % (i % 3), b"v%d" % i)])
    log.roll()
    log.close()
    path = directory / "00000000000000000000.log"
    return [
        LogSegment(directory, 0, config=config, created_ms=START, size_bytes=path.stat().st_size),
        LogSegment(directory, batches, config=config, created_ms=START, size_bytes=0),
    ]


def undecodable_lz4_batch(offset: int) -> bytes:
    """A batch with a valid CRC whose lz4 records area is no LZ4 frame: the codec refuses it."""
    record = Record(offset, START, b"k", b"v")
    return encode_batch([record], compression=CompressionType.LZ4, records_area=b"\x04\x22\x4d\x18 garbage")


@pytest.mark.parametrize("damage", ["crc", "legacy", "torn", "codec"])
def test_a_batch_the_c_scan_stops_at_raises_the_python_error(tmp_path: Path, damage: str) -> None:
    errors = []
    for native in (True, False):
        segments = plain_log(tmp_path / f"{damage}-{native}" / "topic-0")
        path = segments[0].log_path
        data = bytearray(path.read_bytes())
        if damage == "crc":
            data[-3] ^= 0xFF  # inside the last batch's records
        elif damage == "legacy":
            data += legacy_message(6)
        elif damage == "codec":
            data += undecodable_lz4_batch(6)
        else:
            data += data[:30]  # half a batch header at the end
        path.write_bytes(bytes(data))
        segments[0] = LogSegment(
            path.parent, 0, config=compact_config(), created_ms=START, size_bytes=len(data)
        )
        with pytest.raises(CorruptDataError) as caught:
            build_offset_map(segments, 0, 7, OffsetMap(native=native), CleanerStats())
        errors.append((type(caught.value), str(caught.value).replace(f"{damage}-{native}", "")))
    assert errors[0] == errors[1]
    assert str(path) in str(caught.value) or path.name in str(caught.value)


def test_plain_batches_are_filtered_by_the_c_loop_and_match_the_python_rules(tmp_path: Path) -> None:
    """Runs of plain batches go through ``filter_batches`` (one call per chunk), the rest batch by batch."""
    calls: list[int] = []
    real = cleaner.native.filter_batches  # what cleaner.compaction.cleaner imported

    def counting(*args: object) -> tuple[int, bytes | memoryview, bytes]:
        result = real(*args)  # type: ignore[arg-type]  # the same arguments, passed through
        calls.append(len(result[2]) // 80)  # batches handled: ten int64 each
        return result

    seen = []
    for native in (True, False):
        directory = tmp_path / f"n{native}" / "topic-0"
        plain_log(directory, batches=40)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cleaner.compaction.cleaner, "filter_batches", counting)
            if not native:
                patch.setattr(cleaner.native, "_native", None)
            seen.append(clean_three_times(directory))
    assert seen[0] == seen[1]
    assert sum(calls) >= 39 and max(calls) > 10, "the first round: whole runs of batches per call"


def producer_log(
    directory: Path, codec: CompressionType, *, transactional: bool, aborts: bool = False
) -> int:
    """Small batches of one producer (id 7; transactional ones ended four batches at a time by a COMMIT, or
    given ``aborts`` by an ABORT for the 2nd, 5th and 8th transaction), compressed with ``codec``; its last
    batch's keys all written again after it by a batch without a producer id, so that none of its records
    survives. The offset of the last batch (the upper bound's)."""
    directory.mkdir(parents=True)
    log = load_partition_log(directory, compact_config(segment_bytes=4096), clock=ManualClock(START)).log
    producer = Producer(log, 7, transactional=transactional)
    for i in range(40):
        records = [Record(0, START + i, b"k%d" % ((3 * i + j) % 7), b"v%d" % i) for j in range(3)]
        log.append_records(
            records,
            compression=codec,
            producer_id=7,
            producer_epoch=0,
            base_sequence=producer.sequence,
            is_transactional=transactional,
        )
        producer.sequence += len(records)
        if transactional and i % 4 == 3:
            if aborts and i // 4 % 3 == 1:
                producer.abort()
            else:
                producer.commit()
    log.append_records([Record(0, START, b"k%d" % k, None) for k in range(7)], compression=codec)
    last = log.append_records([Record(0, START, b"last", b"v")]).first_offset  # the upper bound's: Python's
    log.roll()
    log.close()
    return last


@pytest.mark.parametrize(
    ("transactional", "aborts"),
    [(False, False), (True, False), (True, True)],
    ids=["idempotent", "transactional", "aborted"],
)
@pytest.mark.parametrize("codec", list(CompressionType))
def test_a_producer_s_compressed_batches_are_cleaned_by_the_c_loops(
    tmp_path: Path, codec: CompressionType, transactional: bool, aborts: bool
) -> None:
    """Batches with a producer id, compressed or not, idempotent or in transactions committed or aborted
    (their markers too), go through the C loops of both passes: no batch through the Python rules batch by
    batch, but the one at the upper bound and the bare header a round left. The producer's last batch, all
    of its records superseded, stays as a bare header (its producer's state); aborted data goes, its ABORT
    marker kept and indexed while the data is there, then given a horizon; the files are the Python
    rules'."""
    python_batches: list[RecordBatch] = []
    real_clean, real_map = cleaner.compaction.cleaner._clean_batch, cleaner.compaction.offset_map._map_batch

    def clean_counted(batch: RecordBatch, *args: object) -> None:
        python_batches.append(batch)
        real_clean(batch, *args)  # type: ignore[arg-type]  # the same arguments, passed through

    def map_counted(batch: RecordBatch, *args: object) -> bool:
        python_batches.append(batch)
        return real_map(batch, *args)  # type: ignore[arg-type]  # the same arguments, passed through

    seen = []
    for native in (True, False):
        directory = tmp_path / f"n{native}" / "topic-0"
        last = producer_log(directory, codec, transactional=transactional, aborts=aborts)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cleaner.compaction.cleaner, "_clean_batch", clean_counted)
            patch.setattr(cleaner.compaction.offset_map, "_map_batch", map_counted)
            if not native:
                patch.setattr(cleaner.native, "_native", None)
            seen.append(clean_three_times(directory))
        if native:
            assert not [b for b in python_batches if b.is_control], "the markers too, in C"
            assert [b.base_offset for b in python_batches if b.records_count] == [last, last, last]
            assert len(python_batches) == 5, "and from the second round on, the bare header the first left"
    assert seen[0] == seen[1]
    batches = _batches_of(seen[0][0])
    assert [b.records_count for b in batches if b.producer_id == 7 and not b.is_control][-1] == 0
    assert batches[-1].base_offset == last and len(batches) < 25
    if aborts:
        indexed = [decode_entries(body) for name, body in seen[0][0].items() if name.endswith(".txnindex")]
        assert len([txn for entries in indexed for txn in entries]) == 3, "the aborted, indexed again"
        assert len([b for b in batches if b.is_control]) == 3 + 7, "their ABORTs, the COMMITs with data"
        later = [b.base_offset for b in _batches_of(seen[0][2]) if b.is_control]
        assert later == [max(b.base_offset for b in batches if b.is_control)], (
            "a day later, only the last COMMIT: the bare header of its transaction's data stays"
        )


def _txn_batches() -> list[bytes]:
    """Producer 1's committed data, then data of its aborted transaction (from 2) and producer 2's (from 4),
    producer 3's committed data while its aborted transaction (from 50) is pending, plain data, both ABORTs
    (data seen), producer 3's COMMIT, producer 1's next aborted transaction (from 8) and its data."""

    def data(offset: int, producer_id: int, count: int = 1) -> bytes:
        records = [Record(offset + i, START, b"k%d" % (offset + i), b"v") for i in range(count)]
        transactional = producer_id != -1
        epoch, sequence = (0, offset) if transactional else (-1, -1)
        return encode_batch(
            records,
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=sequence,
            is_transactional=transactional,
        )

    def marker(offset: int, producer_id: int, *, commit: bool) -> bytes:
        return encode_end_txn_marker_batch(
            offset=offset, producer_id=producer_id, producer_epoch=0, commit=commit, timestamp=START
        )

    return [
        data(0, 1),
        data(1, -1),
        data(2, 1, count=2),
        data(4, 2),
        data(5, 3),
        marker(6, 1, commit=False),
        marker(7, 3, commit=True),
        data(8, 1),
        marker(9, 2, commit=False),
        data(10, 1),
    ]


def _txn_state() -> CleanedTransactionMetadata:
    state = CleanedTransactionMetadata()
    state.add_aborted_transactions(
        [AbortedTxn(1, 2, 6, 7), AbortedTxn(2, 4, 9, 10), AbortedTxn(1, 8, 12, 13), AbortedTxn(3, 50, 60, 61)]
    )
    return state


def _state_of(state: CleanedTransactionMetadata) -> tuple[object, ...]:
    """The aborted transactions pending (in order) and ongoing, and the ongoing committed producers."""
    pending = [txn for _first, _seq, txn in sorted(state._heap)]
    ongoing = {pid: (o.txn, o.last_observed_batch_offset) for pid, o in state._ongoing_aborted.items()}
    return pending, ongoing, set(state.ongoing_committed)


def test_the_c_loops_change_the_transaction_state_as_its_methods_do() -> None:
    """Over transactional data, aborted and not, and COMMIT and ABORT markers, the C filter and map change
    the transaction state (the ongoing committed producers, the aborted transactions pending and ongoing,
    the ABORTs kept) as ``on_batch_read`` and ``on_control_batch_read`` do batch by batch."""
    native = cleaner.native._native
    assert native is not None
    raw = _txn_batches()
    python, retained = _txn_state(), []
    for batch in iter_batches(b"".join(raw)):
        if batch.is_control:
            verdict = python.on_control_batch_read(batch)
            if verdict.retained_aborted_txn is not None:
                retained.append(verdict.retained_aborted_txn)
        else:
            python.on_batch_read(batch)
    assert retained == [AbortedTxn(1, 2, 6, 7), AbortedTxn(2, 4, 9, 10)]

    ends = cleaner.native.producer_ends([(1, 1000), (2, 1000), (3, 1000)])  # none of these is the last
    filtered = _txn_state()
    cursor = filtered.native_cursor()
    buf = b"".join(raw)
    reached, _out, _meta = native.filter_batches(
        buf,
        0,
        len(buf),
        native.KeyMap(),
        1000,
        START,
        START,
        1000,
        None,
        ends,
        filtered.ongoing_committed,
        cursor.cells,
    )
    assert reached == len(buf), "every batch taken"
    assert filtered.take_native(cursor) == retained
    assert _state_of(filtered) == _state_of(python)

    mapped = _txn_state()
    cursor = mapped.native_cursor()
    assert native.KeyMap().map_batches(buf, 0, len(buf), 0, cursor.cells)[0] == len(buf)
    assert mapped.take_native(cursor) == retained  # which the map ignores, as it ignores the verdicts
    assert _state_of(mapped)[:2] == _state_of(python)[:2]  # the ongoing committed: what the map ignores


def compressed_batch(framing: str, records: int = 1_000) -> bytes:
    """One batch of ``records`` keyed records (offsets from 0, 20 keys, 100-byte values) whose records area
    is compressed in ``framing``: Kafka's own (ours), or as other writers frame it."""
    area = encode_records_area(
        [START] * records, [b"k%d" % (i % 20) for i in range(records)], [bytes(100)] * records
    )
    half = len(area) // 2
    framings: dict[str, tuple[CompressionType, Callable[[], bytes]]] = {
        "lz4": (CompressionType.LZ4, lambda: compress(CompressionType.LZ4, area)),
        "lz4 with content size": (CompressionType.LZ4, lambda: lz4.frame.compress(area)),
        "zstd": (CompressionType.ZSTD, lambda: compress(CompressionType.ZSTD, area)),
        "zstd streamed": (
            CompressionType.ZSTD,
            lambda: zstandard.ZstdCompressor(write_content_size=False).compress(area),
        ),
        "zstd in two frames": (
            CompressionType.ZSTD,
            lambda: compress(CompressionType.ZSTD, area[:half]) + compress(CompressionType.ZSTD, area[half:]),
        ),
        "snappy": (CompressionType.SNAPPY, lambda: compress(CompressionType.SNAPPY, area)),
        "gzip": (CompressionType.GZIP, lambda: compress(CompressionType.GZIP, area)),
        "gzip in two members": (
            CompressionType.GZIP,
            lambda: compress(CompressionType.GZIP, area[:half]) + gzip.compress(area[half:], mtime=0),
        ),
    }
    codec, blob = framings[framing]
    placeholders = [Record(i, START, None, None) for i in range(records)]
    return encode_batch(placeholders, compression=codec, records_area=blob())


@pytest.mark.parametrize(
    "framing",
    [
        "lz4",
        "lz4 with content size",
        "zstd",
        "zstd streamed",
        "zstd in two frames",
        "snappy",
        "gzip",
        "gzip in two members",
    ],
)
def test_the_system_s_codec_libraries_read_what_the_python_codecs_read(framing: str) -> None:
    """Where libz, libsnappy, liblz4 and libzstd are installed, the C loops decompress gzip members, xerial
    snappy, Kafka's LZ4 framing and every zstd frame with them, with no Python call; any other framing goes
    to the Python function. Either way the map and the filter come out the same as with the Python function
    alone."""
    native = cleaner.native._native
    codecs = compression_module._codecs
    assert native is not None and codecs is not None
    data = compressed_batch(framing)
    python_calls: list[int] = []

    def counting(codec: CompressionType, blob: memoryview) -> bytes:
        python_calls.append(codec)
        return decompress(codec, blob)

    outcomes = []
    try:
        native.set_codecs(counting, compress, tuple(CompressionType), system_codecs())
        for system in (True, False):
            native.set_system_codecs(system)
            served = codecs.served() if system else ()
            python_calls.clear()
            key_map = native.KeyMap()
            mapped = key_map.map_batches(data, 0, len(data), 0)
            filtered = native.filter_batches(data, 0, len(data), key_map, 10_000, START, START, -1)
            outcomes.append((mapped, native.dump_key_map(key_map), filtered))
            expected_python_calls = 2  # the map's and the filter's
            if system and framing != "lz4 with content size":
                if CompressionType[framing.split()[0].upper()] not in served:
                    pytest.skip(f"this system has no library for {framing.split()[0]}")
                expected_python_calls = 0
            assert len(python_calls) == expected_python_calls
    finally:
        native.set_codecs(decompress, compress, tuple(CompressionType), system_codecs())
        native.set_system_codecs(True)
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0][:2] == (len(data), 1), "the batch was mapped in C"
    assert len(outcomes[0][2][2]) == 80, "and filtered in C"


@pytest.mark.parametrize("framing", ["gzip", "lz4", "zstd", "snappy"])
def test_survivors_are_compressed_by_the_c_function_behind_compress(framing: str) -> None:
    """The C filter compresses a batch's survivors as ``compress`` would: for gzip, snappy, lz4 and zstd
    where the system has the libraries, by the C function ``compress`` itself uses, with no Python call;
    else by calling it."""
    native = cleaner.native._native
    assert native is not None
    data = compressed_batch(framing)
    codec = CompressionType[framing.upper()]
    calls: list[CompressionType] = []

    def counting(codec: CompressionType, area: bytes) -> bytes:
        calls.append(codec)
        return compress(codec, area)

    try:
        native.set_codecs(decompress, counting, tuple(CompressionType), system_codecs())
        key_map = native.KeyMap()
        key_map.map_batches(data, 0, len(data), 0)
        _reached, out, meta = native.filter_batches(data, 0, len(data), key_map, 10_000, START, START, -1)
    finally:
        native.set_codecs(decompress, compress, tuple(CompressionType), system_codecs())
    assert len(meta) == 80, "filtered in C"
    (batch,) = iter_batches(out)
    assert batch.records_count == 20, "the last of each key survives"
    blob = bytes(batch.data[RECORD_BATCH_OVERHEAD:])
    assert blob == compress(codec, batch.records_bytes()), "compress's bytes"
    codecs = compression_module._codecs
    assert codecs is not None
    by_system = codec in codecs.served()
    assert calls == ([] if by_system else [codec])


@settings(max_examples=60, deadline=None)
@given(size=st.integers(0, 80_000), skew=st.integers(0, 7), seed=st.binary(min_size=1, max_size=16))
def test_crc32c_over_three_streams_matches_the_crc32c_package(size: int, skew: int, seed: bytes) -> None:
    """Long inputs take the three-stream path (blocks of 8 KiB and 256 bytes), at any alignment."""
    native = cleaner.native._native
    assert native is not None
    data = (seed * (size // len(seed) + 1))[:size]
    view = memoryview(bytes(skew) + data)[skew:]
    assert native.crc32c(view) == crc32c.crc32c(data) == native.crc32c_by_table(data)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(min_size=200, max_size=3_000), skew=st.integers(0, 63))
def test_crc32c_by_carry_less_multiplication_matches_the_crc32c_package(data: bytes, skew: int) -> None:
    """From 256 bytes on, a CPU with VPCLMULQDQ folds 256 bytes a step (elsewhere this is the three-stream
    or the table path again): every length around the steps, at any alignment, random bytes."""
    native = cleaner.native._native
    assert native is not None
    view = memoryview(bytes(skew) + data)[skew:]
    for end in (len(data), 255, 256, 257, 511, 512, 513, 767):
        assert native.crc32c(view[:end]) == crc32c.crc32c(data[:end]), end


def plain_segment_bytes(tmp_path: Path) -> bytes:
    """Six plain batches, keys k0 k1 k2 k0 k1 k2 at offsets 0-5 (``plain_log``), as one buffer."""
    segments = plain_log(tmp_path / "topic-0")
    return segments[0].log_path.read_bytes()


def kept_offsets(data: bytes, key_map: object) -> list[int]:
    native = cleaner.native._native
    assert native is not None
    reached, _out, meta = native.filter_batches(data, 0, len(data), key_map, 1_000, START, START, -1)
    assert reached == len(data)
    rows = memoryview(meta).cast("q")
    return [rows[i + 5] for i in range(0, len(rows), 10) if rows[i + 8]]  # last offsets of batches kept


def test_a_batch_the_bitmap_marks_wholly_superseded_is_dropped_and_no_other(tmp_path: Path) -> None:
    """``filter_batches`` drops a plain batch whose every offset the bitmap marks superseded without
    parsing its records; a batch with one survivor anywhere in it, or with offsets no record holds
    (compacted before), goes through the record rules. The three rounds match the Python rules'."""
    batches = [
        [b"a0", b"a1", b"a2", b"a3"],  # offsets 0-3: all superseded by the last batch
        [b"b0", b"only", b"b2"],  # 4-6: the middle record survives
        [b"b0", b"c1", b"b2", b"c3"],  # 7-10: c1 and c3 are superseded by the last batch
        [b"a0", b"a1", b"a2", b"a3", b"c1", b"c3"],  # 11-16
    ]
    seen = []
    for native in (True, False):
        directory = tmp_path / f"n{native}" / "topic-0"
        directory.mkdir(parents=True)
        log = load_partition_log(directory, compact_config(), clock=ManualClock(START)).log
        for keys in batches:
            log.append_records([Record(0, START, key, b"v-" + key) for key in keys])
        log.roll()
        log.close()
        with pytest.MonkeyPatch.context() as patch:
            if not native:
                patch.setattr(cleaner.native, "_native", None)
            seen.append(clean_three_times(directory))
    assert seen[0] == seen[1]
    kept = [r.key for b in _batches_of(seen[0][0]) for r in b.records()]
    assert kept == [b"only", b"b0", b"b2", b"a0", b"a1", b"a2", b"a3", b"c1", b"c3"]


def _batches_of(files_seen: dict[str, bytes]) -> list[RecordBatch]:
    data = b"".join(body for name, body in sorted(files_seen.items()) if name.endswith(".log"))
    return list(iter_batches(data))


def test_a_key_map_dumped_into_a_file_is_the_blob_dump_key_map_returns(tmp_path: Path) -> None:
    """``dump_key_map_to`` writes through a 1 MiB buffer: many entries cross its ends, and a key longer
    than the buffer goes to the file on its own."""
    key_map = cleaner.native.new_native_key_map()
    assert key_map is not None
    for i in range(120_000):
        key_map.put(b"key-%d" % i, i)
    key_map.put(b"L" * (3 << 20), 120_000)
    key_map.put(b"after-the-long-key", 120_001)
    path = tmp_path / "dump"
    path.write_bytes(b"head")
    fd = os.open(path, os.O_RDWR)
    try:
        written = cleaner.native.dump_key_map_to(key_map, fd, 4)
    finally:
        os.close(fd)
    blob = cleaner.native.dump_key_map(key_map)
    assert written == len(blob) > 3 << 20
    assert path.read_bytes() == b"head" + blob


def test_filter_batches_writes_into_a_given_buffer_what_it_would_return(tmp_path: Path) -> None:
    """Given ``out``, the same output goes into it (a length comes back); a run stops before a batch whose
    output would not fit, and a first batch that does not fit is an error, not a partial write."""
    native = cleaner.native._native
    assert native is not None
    data = plain_segment_bytes(tmp_path)
    key_map = native.KeyMap()
    key_map.map_batches(data, 0, len(data), 0)
    args = (data, 0, len(data), key_map, 1_000, START, START, -1)
    reached, out, meta = native.filter_batches(*args)
    space = bytearray(2 * len(data) + (64 << 10))
    assert native.filter_batches(*args, space) == (reached, len(out), meta)
    assert space[: len(out)] == out
    sizes = memoryview(meta).cast("q")[2::10]  # k0 k1 k2 dropped, then k0 k1 k2 kept as they are
    assert len(out) == sum(sizes[3:])
    short = bytearray(len(out) - 1)  # room for all but the last batch
    reached_short, length, meta_short = native.filter_batches(*args, short)
    assert (reached_short, length, len(meta_short)) == (len(data) - sizes[5], len(out) - sizes[5], 5 * 80)
    assert short[:length] == out[:length]
    dropped = bytearray(0)  # a run of dropped batches writes nothing: it fits in no room at all
    assert native.filter_batches(*args, dropped)[:2] == (sum(sizes[:3]), 0)
    first_kept = (data, sum(sizes[:3]), *args[2:])
    with pytest.raises(ValueError, match="too small"):
        native.filter_batches(*first_kept, bytearray(sizes[3] - 1))
    reached_view, view, _ = cleaner.native.filter_batches(
        memoryview(data), 0, len(data), key_map, 1_000, START, START, -1, space
    )
    assert (reached_view, bytes(view)) == (reached, out)


def test_the_superseded_bitmap_answers_for_records_the_scan_put(tmp_path: Path) -> None:
    native = cleaner.native._native
    assert native is not None
    data = plain_segment_bytes(tmp_path)
    key_map = native.KeyMap()
    assert key_map.map_batches(data, 0, len(data), 0)[1] == 6
    assert kept_offsets(data, key_map) == [3, 4, 5]  # each key's last


def test_a_put_from_python_turns_the_bitmap_off(tmp_path: Path) -> None:
    """After a put in any order (Spark's aggregation, the Python rules), the filter looks every key up."""
    native = cleaner.native._native
    assert native is not None
    data = plain_segment_bytes(tmp_path)
    key_map = native.KeyMap()
    key_map.map_batches(data, 0, len(data), 0)
    key_map.put(b"k0", 900)  # k0 at offset 3 is superseded now, which the bitmap does not know
    assert kept_offsets(data, key_map) == [4, 5]
    key_map.clear()  # a new round: the scan's bitmap again
    key_map.map_batches(data, 0, len(data), 0)
    assert kept_offsets(data, key_map) == [3, 4, 5]


def test_a_scan_out_of_offset_order_turns_the_bitmap_off(tmp_path: Path) -> None:
    native = cleaner.native._native
    assert native is not None
    data = plain_segment_bytes(tmp_path)
    key_map = native.KeyMap()
    key_map.map_batches(data, 0, len(data), 0)
    key_map.map_batches(data, 0, len(data), 0)  # the same offsets again: not after the last put
    assert kept_offsets(data, key_map) == [3, 4, 5]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=operations,
    codec=st.sampled_from([CompressionType.NONE, CompressionType.GZIP]),
    cut=st.integers(0, 60),
)
def test_the_c_header_scan_equals_the_python_one(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Op], codec: CompressionType, cut: int
) -> None:
    """The producers' batches (a run of one producer's data batches as its last one's row) and the position
    reached, also with a partial batch at the end."""
    log = build(tmp_path_factory.mktemp("scan") / "topic-0", ops, codec, TimestampType.CREATE_TIME)
    for segment in log.segments:
        with segment.log_path.open("ab") as tail:
            tail.write(bytes(range(cut)))  # a torn write: no batch header, or one whose batch is cut
        sized = LogSegment(
            segment.log_path.parent,
            segment.base_offset,
            config=log.config,
            created_ms=START,
            size_bytes=segment.log_path.stat().st_size,
        )
        in_c = cleaner.compaction.rules._scan_headers_native(sized, 0)
        headers = list(cleaner.compaction.rules._iter_headers(sized, 0))
        python = collapsed([h[:4] for h in headers if h[2] >= 0])
        reached = headers[-1][4] if headers else 0
        assert in_c == (reached, python)


def collapsed(rows: list[tuple[int, int, int, int]]) -> list[int]:
    """Header rows (attributes, last offset, producer id, epoch) with each data row replacing its producer's
    row while that one is of a data batch too, flat."""
    out: list[list[int]] = []
    data_row: dict[int, int] = {}  # producer id -> its last row, while that is a data batch's
    for row in rows:
        producer_id, control = row[2], row[0] & 0x20
        if not control and producer_id in data_row:
            out[data_row[producer_id]] = list(row)
            continue
        out.append(list(row))
        if control:
            data_row.pop(producer_id, None)
        else:
            data_row[producer_id] = len(out) - 1
    return [value for row in out for value in row]


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def thread_count_settles_at(expected: int) -> bool:
    """Whether this process's thread count reaches ``expected`` within a second: a joined thread can stay
    listed in /proc for a moment after pthread_join returned (its futex is cleared before it is reaped)."""
    deadline = time.monotonic() + 1.0
    while thread_count() != expected and time.monotonic() < deadline:
        time.sleep(0.001)
    return thread_count() == expected


def test_a_map_puts_on_a_thread_of_its_own_only_while_a_core_is_spare(tmp_path: Path) -> None:
    """As many rounds at once as cores (``log.cleaner.threads``): the puts stay on the round's thread."""
    native = cleaner.native._native
    assert native is not None and cleaner.native.puts_pipelined()  # CI and this project's machines: 2 cores
    data = plain_segment_bytes(tmp_path)
    cores = usable_cpus()
    before = thread_count()
    counts_as_expected: list[bool] = []
    with contextlib.ExitStack() as rounds:
        for running in range(cores + 1):
            key_map = native.KeyMap()
            with cleaner.native.puts_on_own_thread(key_map):
                # 0 .. cores - 1 rounds running: the map's own thread; as many rounds as cores: none (the
                # last map's thread, joined, can stay listed a moment: the count is given time to settle)
                counts_as_expected.append(thread_count_settles_at(before + (running < cores)))
                key_map.map_batches(data, 0, len(data), 0)
            rounds.enter_context(cleaner.native.cleaning_round())
    assert counts_as_expected == [True] * (cores + 1)


def test_a_read_or_put_from_python_waits_for_the_puts_handed_over(tmp_path: Path) -> None:
    """While the pipeline runs, get, len, put and the filter first wait for the scan's puts, so they see
    them all and a put from Python lands after them."""
    native = cleaner.native._native
    assert native is not None
    data = plain_segment_bytes(tmp_path)
    key_map = native.KeyMap()
    before = thread_count()
    assert key_map.start_pipeline() is True
    assert thread_count() == before + 1
    key_map.map_batches(data, 0, len(data), 0)
    assert len(key_map) == 3 and key_map.get(b"k0") == 3
    assert kept_offsets(data, key_map) == [3, 4, 5]
    key_map.map_batches(data, 0, len(data), 0)  # the same offsets again: out of order, bitmap off
    key_map.put(b"k0", 900)
    assert key_map.get(b"k0") == 900
    key_map.finish_pipeline()
    assert thread_count_settles_at(before)
    assert kept_offsets(data, key_map) == [4, 5]


def test_a_key_map_dropped_while_its_pipeline_runs_ends_the_thread(tmp_path: Path) -> None:
    native = cleaner.native._native
    assert native is not None
    data = plain_segment_bytes(tmp_path)
    before = thread_count()
    key_map = native.KeyMap()
    key_map.start_pipeline()
    key_map.map_batches(data, 0, len(data), 0)
    del key_map
    assert thread_count_settles_at(before)


def test_a_batch_outside_transactions_is_filtered_by_the_bitmap_where_it_covers_it(tmp_path: Path) -> None:
    """``filter_records`` (a batch ``filter_batches`` leaves: the round's last, a compressed one) reads
    "superseded" from the scan's bitmap as ``filter_batches`` does, so a Spark task whose entries are
    deferred puts them only for a record the bits do not cover. Shown with deferred entries that disagree
    with the bits: which of them answered is seen in what is kept."""
    native = cleaner.native._native
    assert native is not None
    segment = plain_log(tmp_path / "topic-0")[0]
    data = segment.log_path.read_bytes()
    scanned = native.KeyMap()
    scanned.map_batches(data, 0, len(data), 0)  # k0 k1 k2 at 0-2 superseded by 3-5
    bits = native.dump_superseded_bits(scanned)
    stale = native.dump_key_map(native.KeyMap())  # no entry: every lookup says "not superseded"
    batch = next(segment.batches())  # k0 at offset 0
    for use_bitmap, kept in ((True, 0), (False, 1)):
        key_map = native.KeyMap()
        native.or_superseded_bits(key_map, bits)
        native.defer_key_map(key_map, stale)
        result = native.filter_records(
            batch.records_bytes(),
            1,
            0,
            batch.base_timestamp,
            None,
            key_map,
            5,
            START,
            None,
            START,
            False,
            False,
            False,
            use_bitmap,
        )
        assert result[2] == kept


def test_a_map_told_to_skip_batch_checks_reads_a_damaged_batch_s_keys(tmp_path: Path) -> None:
    """A Spark task's map reads only keys (its round's rewrite checks every batch before anything is used):
    a batch whose CRC no longer matches stops a checking scan, not this one."""
    native = cleaner.native._native
    assert native is not None
    data = bytearray(plain_segment_bytes(tmp_path))
    data[-3] ^= 0xFF  # the last batch's value: its CRC no longer matches, its key is intact
    checking, reading = native.KeyMap(), native.KeyMap()
    cleaner.native.skip_batch_checks(reading)
    assert checking.map_batches(bytes(data), 0, len(data), 0)[1] == 5  # stops at the damaged sixth batch
    assert reading.map_batches(bytes(data), 0, len(data), 0)[1] == 6
    assert (checking.get(b"k2"), reading.get(b"k2")) == (2, 5)


def test_the_filter_checks_again_only_the_batches_its_map_s_own_scan_did_not(tmp_path: Path) -> None:
    """A batch that the scan behind the map's bitmap read this round, CRC and records checked, is not
    checked a second time by the filter (one CRC pass a round over the dirty section). A map whose scan
    skipped the checks, or whose bits were OR'd in from other maps, leaves every batch to the filter's
    check. Shown by handing the filter bytes damaged after the scan: which maps notice is what each trusts."""
    native = cleaner.native._native
    assert native is not None
    data = plain_segment_bytes(tmp_path)
    damaged = bytearray(data)
    damaged[-3] ^= 0xFF  # the last batch's value: its CRC no longer matches
    last_batch_at = len(data) - list(iter_batches(data))[-1].size_bytes
    checked, unchecked, foreign = native.KeyMap(), native.KeyMap(), native.KeyMap()
    checked.map_batches(data, 0, len(data), 0)
    cleaner.native.skip_batch_checks(unchecked)
    unchecked.map_batches(data, 0, len(data), 0)
    native.or_superseded_bits(foreign, native.dump_superseded_bits(checked))
    reached = {
        name: native.filter_batches(bytes(damaged), 0, len(damaged), key_map, 5, START, START, -1)[0]
        for name, key_map in (("checked", checked), ("unchecked", unchecked), ("foreign", foreign))
    }
    assert reached == {"checked": len(data), "unchecked": last_batch_at, "foreign": last_batch_at}

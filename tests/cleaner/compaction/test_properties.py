"""Random compacted logs (few keys, tombstones, several segments, transactional producers that commit or
abort) cleaned by the rules: what must hold whatever the log, and that the per-group unit can run from
precomputed inputs (the contract a parallel path relies on)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleaner.compaction.cleaner import Cleaner, clean_group, delete_segments
from cleaner.compaction.grouping import group_segments_by_size
from cleaner.compaction.key_map_budget import KeyMapBudget
from cleaner.compaction.offset_map import OffsetMap, build_offset_map, segments_overlapping
from cleaner.compaction.oracle import clean_in_process, log_contents
from cleaner.compaction.rules import ProducerScan
from cleaner.compaction.stats import CleanerStats
from cleaner.compaction.txn_metadata import CleanedTransactionMetadata, collect_aborted_txns
from cleaner.native import has_native
from service.base.clock import ManualClock
from service.storage.compression import CompressionType
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_files import CLEANED_SUFFIX
from service.storage.records import Record, RecordBatch
from service.storage.segment import LogSegment
from tests.cleaner.helpers import DAY_MS, Producer, all_batches, compact_config

KEYS = [b"a", b"b", b"c", b"d", b"e"]
PRODUCERS = [1, 2, 3]
START = 1_400_000_000_000


class Op(NamedTuple):
    kind: str  # put, txn, end (commit or abort), roll
    producer_id: int = 0
    entries: tuple[tuple[bytes, bytes | None], ...] = ()
    commit: bool = True


values = st.one_of(st.none(), st.binary(min_size=1, max_size=6))
entries = st.lists(st.tuples(st.sampled_from(KEYS), values), min_size=1, max_size=3).map(tuple)
operations = st.lists(
    st.one_of(
        st.builds(Op, st.just("put"), st.just(0), entries),
        st.builds(Op, st.just("txn"), st.sampled_from(PRODUCERS), entries),
        st.builds(Op, st.just("end"), st.sampled_from(PRODUCERS), commit=st.booleans()),
        st.just(Op("roll")),
    ),
    min_size=1,
    max_size=30,
)
codecs = st.sampled_from([CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD])


@dataclass
class Model:
    """What the log should say once cleaned: each key's latest committed record (None: a tombstone)."""

    latest: dict[bytes, Record] = field(default_factory=dict)
    aborted: set[int] = field(default_factory=set)
    pending: dict[int, list[Record]] = field(default_factory=dict)

    def committed(self, records: list[Record]) -> None:
        for record in records:
            previous = self.latest.get(record.key or b"")
            if previous is None or previous.offset < record.offset:
                self.latest[record.key or b""] = record


def build(directory: Path, ops: list[Op], codec: CompressionType) -> tuple[PartitionLog, Model]:
    clock = ManualClock(START)
    directory.mkdir(parents=True)
    log = load_partition_log(directory, compact_config(segment_bytes=400), clock=clock).log
    producers = {pid: Producer(log, pid) for pid in PRODUCERS}
    model = Model()
    for op in ops:
        pid = op.producer_id
        records = [Record(0, START, key, value) for key, value in op.entries]
        if op.kind == "put":
            info = log.append_records(records, compression=codec)
            model.committed([r._replace(offset=o) for r, o in zip(records, info.record_offsets, strict=True)])
        elif op.kind == "txn":
            info = log.append_records(
                records,
                compression=codec,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=producers[pid].sequence,
                is_transactional=True,
            )
            producers[pid].sequence += len(records)
            placed = [r._replace(offset=o) for r, o in zip(records, info.record_offsets, strict=True)]
            model.pending.setdefault(pid, []).extend(placed)
        elif op.kind == "end":
            end_txn(producers[pid], model, commit=op.commit)
        else:
            log.roll()
    for pid in PRODUCERS:
        if pid in model.pending:
            end_txn(producers[pid], model, commit=True)
    log.roll()
    return log, model


def end_txn(producer: Producer, model: Model, *, commit: bool) -> None:
    records = model.pending.pop(producer.producer_id, [])
    (producer.commit if commit else producer.abort)()
    if commit:
        model.committed(records)
    else:
        model.aborted.update(r.offset for r in records)


def check_cleaned(
    log: PartitionLog, original: list[RecordBatch], model: Model, *, tombstones_gone: bool
) -> None:
    batches = all_batches(log)
    by_base = {b.base_offset: b for b in original}
    originals = {r.offset: r for b in original for r in b.records()}
    last = -1
    for batch in batches:
        source = by_base[batch.base_offset]
        header = (
            "last_offset",
            "producer_id",
            "producer_epoch",
            "base_sequence",
            "is_transactional",
            "is_control",
        )
        assert [getattr(batch, f) for f in header] == [getattr(source, f) for f in header]
        assert batch.base_offset > last, "batches in order, never overlapping"
        last = batch.last_offset
        for record in batch.records():
            assert originals[record.offset] == record, "records keep offset, timestamp, key, value"
            assert record.offset not in model.aborted
    data = [r for b in batches if not b.is_control for r in b.records()]
    assert [r.offset for r in data] == sorted({r.offset for r in data}), "offsets strictly increasing"
    for key in KEYS:
        on_disk = [r for r in data if r.key == key]
        latest = model.latest.get(key)
        if latest is None:
            assert on_disk == []
        elif latest.value is None:
            assert on_disk == ([] if tombstones_gone else [latest])
        else:
            assert on_disk == [latest], "the latest value survives at its original offset"


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations, codec=codecs)
def test_random_logs_clean_to_their_latest_values(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Op], codec: CompressionType
) -> None:
    directory = tmp_path_factory.mktemp("prop") / "topic-0"
    log, model = build(directory, ops, codec)
    original = all_batches(log)
    upper = log.active_segment.base_offset

    assert clean_in_process(log, 0, upper, START).end_offset == upper
    check_cleaned(log, original, model, tombstones_gone=False)
    clean_in_process(log, upper, upper, START)  # markers whose data went get their horizon
    check_cleaned(log, original, model, tombstones_gone=False)
    settled = files(directory)
    clean_in_process(log, upper, upper, START)
    assert files(directory) == settled, "nothing new: the files stay byte for byte"

    reloaded = load_partition_log(directory, log.config, clock=ManualClock(START)).log
    assert log_contents(reloaded) == log_contents(log)

    clean_in_process(reloaded, upper, upper, START + DAY_MS)
    check_cleaned(reloaded, original, model, tombstones_gone=True)
    assert not [p for p in directory.iterdir() if p.name.endswith(CLEANED_SUFFIX)]


@dataclass(frozen=True, slots=True)
class NoTable(KeyMapBudget):
    """A budget with no room for a table: every put of the round's scan spills (``native/spill.c``)."""

    def table_bytes(self, first_offset: int, end: int) -> int:
        return 0


@pytest.mark.skipif(not has_native(), reason="the spill is the C key map's")
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations, codec=codecs, dirty_share=st.floats(0.0, 1.0))
def test_random_logs_clean_to_the_same_bytes_when_every_key_spills(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Op], codec: CompressionType, dirty_share: float
) -> None:
    """A round whose map spills every put (the records below the first dirty offset probed) writes the
    bytes of the same round in memory."""
    root = tmp_path_factory.mktemp("spill")
    log, _model = build(root / "memory" / "topic-0", ops, codec)
    upper = log.active_segment.base_offset
    log.close()
    shutil.copytree(root / "memory", root / "spilled")
    first_dirty = int(upper * dirty_share)
    ends = []
    for name, budget in (("memory", None), ("spilled", NoTable(0))):
        config = compact_config(segment_bytes=400)
        copy = load_partition_log(root / name / "topic-0", config, clock=ManualClock(START)).log
        cleaner = Cleaner(
            clock=ManualClock(START), schedule_delete=lambda _delay, delete: delete(), key_map_budget=budget
        )
        ends.append(cleaner.clean(copy, first_dirty, upper).end_offset)
        copy.close()
    assert ends[0] == ends[1]
    assert files(root / "spilled" / "topic-0") == files(root / "memory" / "topic-0")


def clean_groups_from_precomputed_state(log: PartitionLog, upper: int) -> None:
    """What a parallel path does: every group's inputs first, then the groups in any order, then the swaps."""
    segments = log.segments
    offset_map = OffsetMap()
    build_offset_map(segments, 0, upper, offset_map, CleanerStats())
    below = [
        s for s in segments_overlapping(segments, 0, offset_map.latest_offset + 1) if s is not segments[-1]
    ]
    groups = group_segments_by_size(below, log.config.segment_bytes, log.config.segment_index_bytes, upper)
    state = CleanedTransactionMetadata()
    producers = ProducerScan().refresh(log)
    inputs = []
    for group in groups:
        aborted = [
            collect_aborted_txns(
                segments,
                s.base_offset,
                group[i + 1].base_offset if i + 1 < len(group) else s.read_next_offset(),
            )
            for i, s in enumerate(group)
        ]
        inputs.append((group, aborted, state.copy()))
        for segment, txns in zip(group, aborted, strict=True):  # advance the state, header and markers only
            state.add_aborted_transactions(txns)
            for batch in segment.batches():
                if batch.is_control:
                    state.on_control_batch_read(batch)
                else:
                    state.on_batch_read(batch)
    cleaned: dict[int, LogSegment | None] = {}
    for group, aborted, start_state in reversed(inputs):
        cleaned[group[0].base_offset] = clean_group(
            group,
            lookup=offset_map.get,
            map_latest_offset=offset_map.latest_offset,
            now_ms=START,
            delete_retention_ms=log.config.delete_retention_ms,
            upper_bound=upper,
            txn_state=start_state,
            active_producers=producers,
            aborted_txns=aborted,
            directory=log.directory,
            config=log.config,
            stats=CleanerStats(),
        )
    for group, _aborted, _state in inputs:
        result = cleaned[group[0].base_offset]
        if result is not None:
            delete_segments(log.replace_segments([result], group))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_groups_cleaned_from_precomputed_state_match_the_sequential_round(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Op]
) -> None:
    root = tmp_path_factory.mktemp("parallel")
    log, _model = build(root / "topic-0", ops, CompressionType.NONE)
    shutil.copytree(root / "topic-0", root / "copy-0")
    copy = load_partition_log(root / "copy-0", log.config, clock=ManualClock(START)).log
    upper = log.active_segment.base_offset
    clean_in_process(log, 0, upper, START)
    clean_groups_from_precomputed_state(copy, upper)
    assert log_contents(copy) == log_contents(log)
    cleaned = {
        n: b for n, b in files(root / "topic-0").items() if n[0].isdigit() and int(n.split(".")[0]) < upper
    }
    assert {
        n: b for n, b in files(root / "copy-0").items() if n[0].isdigit() and int(n.split(".")[0]) < upper
    } == cleaned

"""Random compacted logs for the Spark engine's tests: keys and tombstones, idempotent and
transactional producers that commit or abort, several codecs, rolls and clock ticks; applied the same way
to any number of logs, so the oracle and the Spark engine start from byte-identical directories."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from hypothesis import strategies as st

from service.base.clock import ManualClock
from service.storage.compression import CompressionType
from service.storage.control import encode_end_txn_marker_batch
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record
from tests.cleaner.helpers import compact_config

START_MS = 1_400_000_000_000
KEYS = [b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h"]
TXN_PRODUCERS = [1, 2, 3]
IDEMPOTENT_PRODUCERS = [10, 11]


class Op(NamedTuple):
    kind: str  # put, idem, txn, end, roll, tick
    producer_id: int = -1
    entries: tuple[tuple[bytes | None, bytes | None], ...] = ()
    commit: bool = True
    codec: CompressionType = CompressionType.NONE
    amount: int = 0  # tick: ms; idem: 1 bumps the epoch first


entry = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=8)))
entries = st.lists(entry, min_size=1, max_size=4).map(tuple)
codecs = st.sampled_from(
    [CompressionType.NONE, CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD]
)
operations = st.lists(
    st.one_of(
        st.builds(Op, st.just("put"), st.just(-1), entries, codec=codecs),
        st.builds(
            Op,
            st.just("idem"),
            st.sampled_from(IDEMPOTENT_PRODUCERS),
            entries,
            amount=st.sampled_from([0, 0, 1]),
        ),
        st.builds(Op, st.just("txn"), st.sampled_from(TXN_PRODUCERS), entries, codec=codecs),
        st.builds(Op, st.just("end"), st.sampled_from(TXN_PRODUCERS), commit=st.booleans()),
        st.just(Op("roll")),
        st.builds(Op, st.just("tick"), amount=st.integers(1, 5_000)),
    ),
    min_size=1,
    max_size=40,
)
configs = st.builds(
    compact_config,
    segment_bytes=st.sampled_from([300, 600, 1024, 4096]),
    segment_index_bytes=st.sampled_from([64, 1024]),
    index_interval_bytes=st.sampled_from([1, 4096]),
)


@dataclass
class Writer:
    """Appends ops to one log, keeping producers' sequences, epochs and open transactions."""

    log: PartitionLog
    clock: ManualClock
    sequences: dict[int, int] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)
    open_txns: set[int] = field(default_factory=set)

    def apply(self, ops: list[Op]) -> None:
        for op in ops:
            self._apply(op)

    def close_transactions(self) -> None:
        """Commit every open transaction, so the whole log is below the last stable offset."""
        for pid in sorted(self.open_txns):
            self._marker(pid, commit=True)

    def _apply(self, op: Op) -> None:
        pid = op.producer_id
        records = [Record(0, self.clock.now_ms(), key, value) for key, value in op.entries]
        if op.kind == "put":
            self.log.append_records(records, compression=op.codec)
        elif op.kind == "idem":
            if op.amount:
                self.epochs[pid] = self.epochs.get(pid, 0) + 1
                self.sequences[pid] = 0
            self._send(pid, records, op.codec, transactional=False)
        elif op.kind == "txn":
            self._send(pid, records, op.codec, transactional=True)
            self.open_txns.add(pid)
        elif op.kind == "end":
            self._marker(pid, commit=op.commit)
        elif op.kind == "roll":
            self.log.roll()
        else:
            self.clock.advance(op.amount)

    def _send(self, pid: int, records: list[Record], codec: CompressionType, *, transactional: bool) -> None:
        sequence = self.sequences.get(pid, 0)
        self.log.append_records(
            records,
            compression=codec,
            producer_id=pid,
            producer_epoch=self.epochs.get(pid, 0),
            base_sequence=sequence,
            is_transactional=transactional,
        )
        self.sequences[pid] = sequence + len(records)

    def _marker(self, pid: int, *, commit: bool) -> None:
        marker = encode_end_txn_marker_batch(
            offset=0,
            producer_id=pid,
            producer_epoch=self.epochs.get(pid, 0),
            commit=commit,
            timestamp=self.clock.now_ms(),
        )
        self.log.append_batches(marker)
        self.open_txns.discard(pid)


def build_twins(root: Path, config: LogConfig, ops: list[Op]) -> tuple[Writer, Writer]:
    """The same random log twice, ``oracle-0`` and ``spark-0`` under ``root``: the same appends, the same
    clock, so the two directories are byte-identical (checked by the caller)."""
    writers = []
    for name in ("oracle-0", "spark-0"):
        directory = root / name
        directory.mkdir(parents=True)
        clock = ManualClock(START_MS)
        writer = Writer(load_partition_log(directory, config, clock=clock).log, clock)
        writer.apply(ops)
        writers.append(writer)
    return writers[0], writers[1]


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}

"""The C path (``cleaner/_native.c``) against the Python rules, its oracle: random logs cleaned both ways
must come out byte for byte the same, and ``LOGCLEANER_PURE_PYTHON=1`` must leave only the Python rules."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cleaner.native
from cleaner.oracle import clean_in_process
from service.clock import ManualClock
from service.storage.compression import CompressionType
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Header, Record, TimestampType
from tests.cleaner.helpers import DAY_MS, Producer, compact_config

pytestmark = pytest.mark.skipif(cleaner.native._native is None, reason="cleaner._native is not built")

KEYS = [b"a", b"b", b"c", b"twelve-bytes", b"longer-than-the-twelve-inline-bytes", b""]
PRODUCERS = [1, 2, 3]
START = 1_400_000_000_000
REPO = Path(__file__).resolve().parents[2]


class Op(NamedTuple):
    kind: str  # put, txn, end (commit or abort), roll
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
    producers = {pid: Producer(log, pid) for pid in PRODUCERS}
    open_txns: set[int] = set()
    for op in ops:
        if op.kind == "put":
            log.append_records(list(op.records), compression=codec)
        elif op.kind == "txn":
            producer = producers[op.producer_id]
            log.append_records(
                list(op.records),
                compression=codec,
                producer_id=op.producer_id,
                producer_epoch=0,
                base_sequence=producer.sequence,
                is_transactional=True,
            )
            producer.sequence += len(op.records)
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
    script = "from cleaner.offset_map import OffsetMap; print(OffsetMap().native is not None)"
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

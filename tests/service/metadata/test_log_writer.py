"""``log_writer``: metadata batches and snapshots as a KRaft controller writes them (for ``gen`` and the
tests): Kafka's snapshot file name, a snapshot framed by a SnapshotHeader and a SnapshotFooter control
batch with its records in batches counted from offset 0, and what it writes read back by ``log_reader``."""

from __future__ import annotations

from pathlib import Path

from service.metadata.log_reader import read_snapshot
from service.metadata.log_writer import (
    MetadataRecordSpec,
    encode_control_batch,
    encode_metadata_batch,
    encode_snapshot,
    snapshot_file_name,
)
from service.metadata.records import TOPIC_RECORD_KEY, decode_metadata_record
from service.storage.control import ControlRecordType, decode_control_type
from service.storage.records import iter_batches

NOW_MS = 1_700_000_000_000
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


def topic(i: int) -> MetadataRecordSpec:
    return MetadataRecordSpec(TOPIC_RECORD_KEY, 0, {"name": f"t{i}", "topic_id": TOPIC_ID})


def test_the_snapshot_file_name_is_kafkas() -> None:
    """``Snapshots.filenameFromSnapshotId``: the end offset in 20 digits, the epoch in 10."""
    assert snapshot_file_name(3, 1) == "00000000000000000003-0000000001.checkpoint"
    assert snapshot_file_name(12345678901234, 2147483647) == "00000012345678901234-2147483647.checkpoint"


def test_a_metadata_batch_holds_framed_records_with_null_keys() -> None:
    (batch,) = iter_batches(encode_metadata_batch([topic(0), topic(1)], base_offset=40, timestamp=NOW_MS))
    assert (batch.base_offset, batch.last_offset, batch.partition_leader_epoch) == (40, 41, 1)
    records = batch.records()
    assert [r.key for r in records] == [None, None]
    assert [decode_metadata_record(r.value).fields for r in records] == [
        {"name": "t0", "topic_id": TOPIC_ID},
        {"name": "t1", "topic_id": TOPIC_ID},
    ]


def test_a_control_batch_is_one_control_record_of_its_type() -> None:
    data = encode_control_batch(ControlRecordType.SNAPSHOT_FOOTER, {"version": 0}, offset=9, timestamp=NOW_MS)
    (batch,) = iter_batches(data)
    assert batch.is_control and batch.base_offset == 9 and batch.records_count == 1
    assert decode_control_type(batch.records()[0].key) is ControlRecordType.SNAPSHOT_FOOTER


def test_a_snapshot_is_framed_and_counts_its_offsets_from_zero() -> None:
    data = encode_snapshot([topic(i) for i in range(5)], timestamp=NOW_MS, epoch=3, batch_records=2)
    batches = list(iter_batches(data))
    kinds = [decode_control_type(b.records()[0].key).name if b.is_control else "data" for b in batches]
    assert kinds == ["SNAPSHOT_HEADER", "data", "data", "data", "SNAPSHOT_FOOTER"]
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 0), (1, 2), (3, 4), (5, 5), (6, 6)]
    assert {b.partition_leader_epoch for b in batches[1:-1]} == {3}


def test_what_it_writes_reads_back(tmp_path: Path) -> None:
    specs = [topic(i) for i in range(2500)]
    path = tmp_path / snapshot_file_name(2500, 1)
    path.write_bytes(encode_snapshot(specs, timestamp=NOW_MS))
    entries = list(read_snapshot(path))
    assert [e.record.fields for e in entries] == [dict(s.fields) for s in specs]
    assert all(e.in_snapshot for e in entries)
    assert [e.offset for e in entries][:3] == [1, 2, 3]


def test_an_empty_snapshot_is_header_and_footer(tmp_path: Path) -> None:
    path = tmp_path / snapshot_file_name(0, 1)
    path.write_bytes(encode_snapshot([], timestamp=NOW_MS))
    assert len(list(iter_batches(path.read_bytes()))) == 2
    assert list(read_snapshot(path)) == []

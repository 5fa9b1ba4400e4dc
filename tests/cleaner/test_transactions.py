"""Producer state and transactions during cleaning: the cases of Kafka's LogCleanerTest."""

from __future__ import annotations

import struct
from pathlib import Path

from service.base.clock import ManualClock
from service.storage.txn_index import AbortedTxn
from tests.cleaner.helpers import (
    DAY_MS,
    LARGE_TIMESTAMP,
    LONG_MAX,
    Producer,
    aborted_txns,
    all_batches,
    batch_base_offsets,
    batch_last_offsets,
    clean,
    keyed,
    keys,
    last_seq,
    new_log,
    offsets,
)

TWO_PASS_GAP = DAY_MS + 1


def test_duplicate_check_state_survives_cleaning(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=2048)
    p1, p2, p3 = (Producer(log, pid, transactional=False) for pid in (1, 2, 3))
    p1.send(1, 2, 3)
    p2.send(3, 1, 4)
    p3.send(1, 4)
    log.roll()
    clean(log, clock)
    assert batch_last_offsets(log) == [2, 5, 7]
    assert [last_seq(log, pid) for pid in (1, 2, 3)] == [2, 2, 1]
    assert keys(log) == [2, 3, 1, 4]
    assert offsets(log) == [1, 3, 6, 7]
    Producer(log, 4, transactional=False).send(2)
    log.roll()
    clean(log, clock)
    assert [last_seq(log, pid) for pid in (1, 2, 3, 4)] == [2, 2, 1, 0]
    assert batch_last_offsets(log) == [2, 5, 7, 8], "pid1's batch is empty now but kept"
    assert keys(log) == [3, 1, 4, 2]
    assert offsets(log) == [3, 6, 7, 8]


def test_retains_producer_last_sequence(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    log.append_records([keyed(0)])
    for pid in (1, 2, 3):
        Producer(log, pid, transactional=False).send(0)
    log.append_records([keyed(1)], producer_id=2, producer_epoch=0, base_sequence=1)
    log.roll()
    clean(log, clock)
    assert batch_last_offsets(log) == [1, 3, 4]
    assert {pid: last_seq(log, pid) for pid in (1, 2, 3)} == {1: 0, 2: 1, 3: 0}
    assert keys(log) == [0, 1]
    assert offsets(log) == [3, 4]


def test_retains_last_sequence_even_if_transaction_aborted(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    p1 = Producer(log, 1)
    p1.send(1)
    p1.send(2, 3)
    p1.abort()
    log.roll()
    clean(log, clock)
    assert batch_last_offsets(log) == [2, 3]
    assert last_seq(log, 1) == 2
    assert keys(log) == []
    assert offsets(log) == [3]
    p1.send(1, 5)  # left open: the test bypasses the LSO by passing the active base
    log.roll()
    clean(log, clock, 0, log.active_segment.base_offset)
    assert batch_last_offsets(log) == [3, 5]
    assert last_seq(log, 1) == 4
    assert keys(log) == [1, 5]
    assert offsets(log) == [3, 4, 5]


def test_basic_transaction_aware_cleaning(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=2048)
    p1, p2 = Producer(log, 1), Producer(log, 2)
    p1.send(1, 2)
    p2.send(2, 3)
    p1.send(3, 4)
    p1.abort()
    p2.commit()
    p1.send(2)
    p1.commit()
    log.roll()
    before = aborted_txns(log)
    clean(log, clock)
    assert keys(log) == [3, 2]
    assert offsets(log) == [3, 6, 7, 8, 9]
    assert aborted_txns(log) == before


def test_transactions_spanning_segments(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=1024)
    p1, p2, p3 = Producer(log, 1), Producer(log, 2), Producer(log, 3)
    p1.send(1, 2)
    p3.send(2, 3)
    p2.send(3, 4)
    log.roll()
    p2.send(5, 6)
    p3.send(6, 7)
    p1.send(7, 8)
    p2.abort()
    p3.send(8, 9)
    p3.commit()
    p1.send(9, 10)
    p1.abort()
    second = log.segments[1].base_offset
    dirty = clean(log, clock, 0, second)
    assert dirty == second
    assert keys(log) == [2, 3, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10]
    log.roll()
    p2.send(11)
    p1.send(12)
    clean(log, clock, dirty, log.active_segment.base_offset)
    assert keys(log) == [2, 3, 6, 7, 8, 9, 11, 12]


def test_commit_marker_removal(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=256)
    p1 = Producer(log, 1)
    p1.send(1)
    p1.send(2, 3)
    p1.commit()
    p1.send(2)
    p1.commit()
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 4, 6]
    clean(log, clock, 0, 6, at=LARGE_TIMESTAMP)
    assert keys(log) == [1, 3, 2]
    assert offsets(log) == [0, 2, 3, 4, 5]
    p1.send(1, 3)
    p1.commit()
    log.roll()
    clean(log, clock, 6, 9, at=LARGE_TIMESTAMP)
    assert keys(log) == [2, 1, 3]
    assert offsets(log) == [3, 4, 5, 6, 7, 8]
    clean(log, clock, 9, 9, at=LARGE_TIMESTAMP)
    assert offsets(log) == [3, 4, 5, 6, 7, 8]
    marker = next(b for b in all_batches(log) if b.base_offset == 3)
    assert marker.delete_horizon_ms == LARGE_TIMESTAMP + DAY_MS
    clean(log, clock, 9, 9, at=LONG_MAX)
    assert offsets(log) == [4, 5, 6, 7, 8]


def test_deleted_batches_with_no_messages_read(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, max_message_bytes=100, segment_bytes=1000)
    p1 = Producer(log, 1)
    p1.send(1)
    p1.abort()
    p1.send(2)
    p1.send(2)
    p1.commit()
    log.roll()
    clean(log, clock, at=LARGE_TIMESTAMP)
    assert keys(log) == [2]
    assert offsets(log) == [1, 3, 4]
    clean(log, clock, at=LARGE_TIMESTAMP)
    clean(log, clock, at=LARGE_TIMESTAMP + TWO_PASS_GAP)
    assert offsets(log) == [3, 4]


def test_commit_marker_retention_with_empty_batch(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=256)
    p1, p2 = Producer(log, 1), Producer(log, 2)
    p1.send(2, 3)
    log.roll()
    p2.send(2, 3)
    p2.commit()
    log.roll()
    log.append_records([keyed(2)])
    log.append_records([keyed(3)])
    p1.commit()
    log.roll()
    clean(log, clock, at=LARGE_TIMESTAMP)
    assert keys(log) == [2, 3]
    assert offsets(log) == [4, 5, 6, 7]
    assert batch_last_offsets(log) == [1, 3, 4, 5, 6, 7]
    clean(log, clock, 8, 8, at=LARGE_TIMESTAMP)
    assert offsets(log) == [4, 5, 6, 7]
    assert batch_last_offsets(log) == [1, 3, 4, 5, 6, 7]
    p2.send(1)
    p2.commit()
    log.roll()
    clean(log, clock, 8, 10, at=LARGE_TIMESTAMP)
    assert keys(log) == [2, 3, 1]
    assert offsets(log) == [4, 5, 6, 7, 8, 9]
    assert batch_last_offsets(log) == [1, 4, 5, 6, 7, 8, 9]
    commit_at_4 = next(b for b in all_batches(log) if b.base_offset == 4)
    assert commit_at_4.delete_horizon_ms is None, "the empty batch of its txn was read in this round"
    clean(log, clock, 10, 10, at=LARGE_TIMESTAMP)
    clean(log, clock, 10, 10, at=LARGE_TIMESTAMP + TWO_PASS_GAP)
    assert offsets(log) == [5, 6, 7, 8, 9]
    assert batch_last_offsets(log) == [1, 5, 6, 7, 8, 9]


def test_clean_empty_control_batch(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=256)
    Producer(log, 1).commit()
    log.append_records([keyed(2)])
    log.append_records([keyed(3)])
    log.roll()
    clean(log, clock, at=LARGE_TIMESTAMP)
    clean(log, clock, at=LARGE_TIMESTAMP + TWO_PASS_GAP)
    assert keys(log) == [2, 3]
    assert offsets(log) == [1, 2]
    assert batch_last_offsets(log) == [0, 1, 2]
    empty = all_batches(log)[0]
    assert empty.is_control and empty.records_count == 0, "kept as p1's last entry, for its epoch"
    clean(log, clock, 3, 3, at=LONG_MAX)
    assert batch_last_offsets(log) == [0, 1, 2]


def test_committed_transaction_spanning_segments(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=128)
    p1 = Producer(log, 1)
    p1.send(1)
    log.roll()
    p1.commit()
    log.roll()
    clean(log, clock, at=LARGE_TIMESTAMP)
    clean(log, clock, at=LARGE_TIMESTAMP + TWO_PASS_GAP)
    assert offsets(log) == [0, 1]
    assert batch_last_offsets(log) == [0, 1]


def test_aborted_transaction_spanning_segments(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=128)
    p1 = Producer(log, 1)
    p1.send(1)
    log.roll()
    p1.abort()
    log.roll()
    clean(log, clock, at=LARGE_TIMESTAMP)
    assert offsets(log) == [1]
    assert batch_last_offsets(log) == [0, 1]
    clean(log, clock, at=LONG_MAX)
    assert offsets(log) == [1]
    assert batch_last_offsets(log) == [0, 1]


def test_abort_marker_removal(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=256)
    p1 = Producer(log, 1)
    p1.send(1)
    p1.send(2, 3)
    p1.abort()
    p1.send(3)
    p1.commit()
    log.roll()
    clean(log, clock, 0, 6)
    assert keys(log) == [3]
    assert offsets(log) == [3, 4, 5]
    now = clock.now_ms()
    clean(log, clock, 6, 6, at=now)
    clean(log, clock, 6, 6, at=now + TWO_PASS_GAP)
    assert keys(log) == [3]
    assert offsets(log) == [4, 5]


def test_empty_batch_removal_with_sequence_reuse(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=2048)
    p1 = Producer(log, 1)
    p1.send(1, sequence=0)
    p1.commit()
    p1.send(2, sequence=0)
    p1.commit()
    log.append_records([keyed(1)])
    log.append_records([keyed(2)])
    log.roll()
    clean(log, clock)
    assert offsets(log) == [1, 3, 4, 5]
    assert batch_last_offsets(log) == [1, 2, 3, 4, 5]
    now = clock.now_ms()
    clean(log, clock, at=now)
    clean(log, clock, at=now + TWO_PASS_GAP)
    assert offsets(log) == [3, 4, 5]
    assert batch_last_offsets(log) == [2, 3, 4, 5]


def test_abort_marker_retention_with_empty_batch(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, segment_bytes=256)
    p1 = Producer(log, 1)
    p1.send(2, 3)
    p1.abort()
    log.roll()
    index = [AbortedTxn(1, 0, 2, 3)]
    assert aborted_txns(log) == index
    now = clock.now_ms()
    clean(log, clock, at=now)
    assert (keys(log), offsets(log), batch_last_offsets(log)) == ([], [2], [1, 2])
    assert aborted_txns(log) == index
    for at in (now, now + TWO_PASS_GAP):
        clean(log, clock, 3, 3, at=at)
        assert (keys(log), offsets(log), batch_last_offsets(log)) == ([], [2], [1, 2])
    p1.send(1)
    log.roll()
    clean(log, clock, 3, 4, at=now)
    assert (keys(log), offsets(log), batch_last_offsets(log)) == ([1], [2, 3], [2, 3])
    assert aborted_txns(log) == index
    for at in (now, now + TWO_PASS_GAP):
        clean(log, clock, 4, 4, at=at)
    assert (keys(log), offsets(log), batch_last_offsets(log)) == ([1], [3], [3])
    assert aborted_txns(log) == []


def test_multi_pass_cleaning_with_aborted_transactions(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock, delete_retention_ms=50_000)
    p1, p2 = Producer(log, 1), Producer(log, 2)
    p1.send(1, 2)
    p2.send(2, 3)
    p1.send(3, 4)
    p1.commit()
    p2.commit()
    p1.send(2, 3)
    p1.abort()
    p2.send(4, 5)
    p1.send(5, 6)
    p1.commit()
    p2.abort()
    p2.send(6, 7)
    p2.commit()
    log.roll()
    assert log.log_end_offset == 20
    index = [AbortedTxn(1, 8, 10, 11), AbortedTxn(2, 11, 16, 17)]
    assert aborted_txns(log) == index
    three_keys = 3  # a 4-slot map at load factor 0.75

    dirty = clean(log, clock, 0, 20, max_map_entries=three_keys)
    assert dirty == 4
    assert batch_base_offsets(log) == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert offsets(log) == [0, 2, 3, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert aborted_txns(log) == index

    dirty = clean(log, clock, dirty, 20, max_map_entries=three_keys)
    assert dirty == 14
    assert batch_base_offsets(log) == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert offsets(log) == [0, 2, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert aborted_txns(log) == []

    clock.advance(50_000)
    dirty = clean(log, clock, dirty, 20, max_map_entries=three_keys)
    assert dirty == 20
    assert batch_base_offsets(log) == [0, 2, 4, 6, 7, 13, 15, 17, 19]
    assert offsets(log) == [0, 2, 4, 5, 6, 7, 13, 15, 17, 18, 19]


def test_keys_conflicting_with_txn_marker_keys(log_dir: Path, clock: ManualClock) -> None:
    log = new_log(log_dir, clock)
    p1, p2 = Producer(log, 1), Producer(log, 2)
    p1.send(1)
    p1.commit()
    commit_key = struct.pack(">hh", 0, 1)
    p2.records([keyed(commit_key, b"value")])
    p2.commit()
    log.roll()
    clean(log, clock)
    assert batch_last_offsets(log) == [0, 1, 2, 3]
    assert offsets(log) == [0, 1, 2, 3], "control records never enter the key map"

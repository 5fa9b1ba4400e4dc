"""PartitionLog: append, offsets, roll rules, reads (much as Kafka's ``UnifiedLogTest`` checks them), and
record validation."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.base.errors import (
    CorruptDataError,
    InvalidInputError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from service.storage.compression import CompressionType
from service.storage.control import encode_end_txn_marker_batch
from service.storage.log_config import LogConfig
from service.storage.records import Record, TimestampType, decode_batch, encode_batch
from service.storage.segment import LogSegment
from service.storage.txn_index import AbortedTxn
from tests.service.storage.conftest import MakeLog, keyed, plain

HOUR_MS = 3_600_000


def test_append_assigns_offsets_and_reads_them_back(make_log: MakeLog) -> None:
    log = make_log()
    first = log.append_records([keyed(b"a", b"1"), keyed(b"b", b"2")])
    second = log.append_records([keyed(b"c", b"3")])
    assert (first.first_offset, first.last_offset, first.record_offsets) == (0, 1, (0, 1))
    assert second.record_offsets == (2,)
    assert log.log_end_offset == log.high_watermark == 3
    assert [(r.offset, r.key, r.value) for r in log.read(0)] == [
        (0, b"a", b"1"),
        (1, b"b", b"2"),
        (2, b"c", b"3"),
    ]
    assert [r.offset for r in log.read(1, max_records=1)] == [1]


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.label)
def test_append_compressed_batches(make_log: MakeLog, codec: CompressionType) -> None:
    log = make_log()
    info = log.append_records([keyed(b"k%d" % i, b"v" * i) for i in range(50)], compression=codec)
    assert info.record_offsets == tuple(range(50))
    assert [r.value for r in log.read(10, 3)] == [b"v" * 10, b"v" * 11, b"v" * 12]


def test_size_based_roll(make_log: MakeLog) -> None:
    """segment.bytes = 10 × (72 − 1); eleven 72-byte batches make two segments."""
    log = make_log(segment_bytes=10 * 71)
    for _ in range(11):
        log.append_records([plain()])
    assert len(log.segments) == 2
    assert [s.size_bytes for s in log.segments] == [9 * 72, 2 * 72], "roll once size > 710 − 72"


def test_time_based_roll(make_log: MakeLog, clock: ManualClock) -> None:
    """Wall clock when the first batch has no timestamp, record time when it has one."""
    log = make_log(segment_ms=HOUR_MS)
    clock.advance(HOUR_MS + 1)
    log.append_records([plain()])
    assert len(log.segments) == 1, "an empty segment never rolls on time"
    log.append_records([plain()])
    assert len(log.segments) == 2
    for expected in (3, 4):
        clock.advance(HOUR_MS + 1)
        log.append_records([plain()])
        assert len(log.segments) == expected
    log.append_records([plain(timestamp=clock.now_ms() + HOUR_MS + 1)])
    assert len(log.segments) == 4, "the segment's first batch had no timestamp: wall clock decides"
    clock.advance(HOUR_MS + 1)
    ts = clock.now_ms()
    log.append_records([plain(timestamp=ts)])
    assert len(log.segments) == 5
    clock.advance(HOUR_MS + 1)
    log.append_records([plain(timestamp=ts)])
    assert len(log.segments) == 5, "record time decides now, and it has not moved"
    log.append_records([plain(timestamp=clock.now_ms())])
    assert len(log.segments) == 6


def test_roll_at_existing_empty_active_segment_is_a_no_op(make_log: MakeLog) -> None:
    """Rolling an empty active segment at its own base keeps one segment."""
    log = make_log()
    log.roll(expected_next_offset=0)
    assert [s.base_offset for s in log.segments] == [0]
    log.append_records([plain()])
    assert log.log_end_offset == 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1026)


def test_index_entries_follow_the_interval_rule(make_log: MakeLog) -> None:
    """index.interval.bytes = 2 × batch − 1 ⇒ an entry on appends 3, 5, …, 29 (14 of 30)."""
    batch_size = len(encode_batch([Record(0, 0, None, b"test")]))
    log = make_log(index_interval_bytes=2 * batch_size - 1)
    for i in range(30):
        log.append_records([plain(timestamp=i)])
    segment = log.active_segment
    assert segment.offset_index.entries == 14
    assert segment.time_index.entries == 14
    assert segment.max_timestamp_so_far == 29
    assert segment.offset_index.lookup(4) == (4, 4 * batch_size)


def test_roll_materialises_trimmed_indexes_of_the_old_segment(make_log: MakeLog, log_dir: Path) -> None:
    """Lazy index creation; a roll trims the old segment's indexes."""
    log = make_log(index_interval_bytes=0)
    for _ in range(3):
        log.append_records([plain(timestamp=5)])
    log.roll()
    names = sorted(p.name for p in log_dir.iterdir())
    assert names.count("00000000000000000000.index") == 1
    assert "00000000000000000003.log" in names
    assert "00000000000000000003.index" not in names
    assert os.path.getsize(log_dir / "00000000000000000000.index") == 2 * 8
    assert os.path.getsize(log_dir / "00000000000000000000.timeindex") == 12


def test_a_roll_deletes_stale_files_at_the_new_segment_s_names_first(
    make_log: MakeLog, log_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's roll: files at the new segment's names belong to no segment, and are deleted first. Kept,
    a stale ``.timeindex`` would lend the new segment a largest timestamp decades ahead (so time retention
    would never delete it), a stale ``.index`` its entries, a stale ``.txnindex`` an aborted transaction."""
    log = make_log(index_interval_bytes=0)
    for _ in range(3):
        log.append_records([plain(timestamp=5)])
    stem = log_dir / "00000000000000000003"
    stem.with_suffix(".log").write_bytes(b"stale")
    stem.with_suffix(".timeindex").write_bytes(struct.pack(">qi", 4_000_000_000_000, 7) * 3)
    stem.with_suffix(".index").write_bytes(struct.pack(">ii", 9, 999_999) * 3)
    stem.with_suffix(".txnindex").write_bytes(struct.pack(">hqqqq", 0, 1, 3, 4, 3))
    with caplog.at_level("WARNING"):
        log.roll()
    assert sorted(m for m in caplog.messages if "already exists" in m) == sorted(
        f"Newly created segment file {stem}{suffix} already exists; {what} it first"
        for suffix, what in (
            (".log", "emptying"),
            (".index", "deleted"),
            (".timeindex", "deleted"),
            (".txnindex", "deleted"),
        )
    )
    active = log.active_segment
    assert (active.base_offset, active.size_bytes, active.max_timestamp_so_far) == (3, 0, -1)
    log.append_records([plain(timestamp=7)])
    log.append_records([plain(timestamp=6)])
    assert (active.max_timestamp_so_far, active.offset_of_max_timestamp) == (7, 3)
    assert (active.offset_index.entries, active.time_index.entries) == (1, 1), "the second append's only"
    assert active.offset_index.lookup(4) == (4, active.size_bytes // 2)
    assert active.txn_index.all_aborted() == []
    assert [r.offset for r in log.read(3)] == [3, 4]


def test_a_new_segment_has_no_largest_timestamp_and_no_time_index_file_yet(tmp_path: Path) -> None:
    """Created empty (stale files deleted), a segment knows it holds no timestamp: asking does not create
    its ``.timeindex`` (lazy, as Kafka's) to read back an empty last entry."""
    segment = LogSegment.create(tmp_path, 42, config=LogConfig(), now_ms=0)
    assert (segment.max_timestamp_so_far, segment.offset_of_max_timestamp) == (-1, 42)
    assert segment.largest_timestamp()[1] == "mtime"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000042.log"]


def test_read_below_log_start_and_at_or_past_end(make_log: MakeLog) -> None:
    log = make_log()
    for i in range(5):
        log.append_records([keyed(b"k", b"%d" % i)])
    assert log.increment_log_start_offset(2)
    assert log.read(0)[0].offset == 2
    assert log.read(5) == []
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(6)
    assert (info.value.log_start_offset, info.value.log_end_offset) == (2, 5)


def test_delete_records_cannot_pass_the_high_watermark(make_log: MakeLog) -> None:
    log = make_log()
    log.append_records([plain(), plain()])
    with pytest.raises(OffsetOutOfRangeError):
        log.increment_log_start_offset(3)
    assert not log.increment_log_start_offset(0)
    assert log.increment_log_start_offset(2)
    assert log.log_start_offset == 2


def test_compacted_topic_rejects_unkeyed_records(make_log: MakeLog) -> None:
    """Nothing is appended when any record lacks a key."""
    log = make_log(cleanup_policy=frozenset({"compact"}))
    with pytest.raises(InvalidInputError, match="record 1 has no key"):
        log.append_records([keyed(b"a", b"1"), plain(b"x")])
    assert log.log_end_offset == 0
    log.append_records([keyed(b"a", b"1")])
    assert log.log_end_offset == 1


def test_create_time_bounds(make_log: MakeLog, clock: ManualClock) -> None:
    """KIP-937: too old or too far in the future is rejected; no timestamp is fine."""
    log = make_log(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500)
    now = clock.now_ms()
    with pytest.raises(InvalidInputError, match=r"before\.max\.ms=1000"):
        log.append_records([plain(timestamp=now - 1001)])
    with pytest.raises(InvalidInputError, match=r"after\.max\.ms=500"):
        log.append_records([plain(timestamp=now + 501)])
    log.append_records([plain(timestamp=now - 1000), plain(timestamp=now + 500), plain(timestamp=-1)])
    assert log.log_end_offset == 3


def test_log_append_time_stamps_the_clock(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log(message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    info = log.append_records([plain(timestamp=5), plain(timestamp=7)])
    assert info.log_append_time_ms == clock.now_ms()
    batch = next(log.read_batches(0))
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.is_crc_valid()
    assert [r.timestamp for r in batch.records()] == [clock.now_ms()] * 2


def test_batch_larger_than_max_message_bytes_is_rejected(make_log: MakeLog) -> None:
    log = make_log(max_message_bytes=100)
    with pytest.raises(RecordTooLargeError, match=r"max\.message\.bytes=100"):
        log.append_records([plain(b"x" * 100)])
    assert log.log_end_offset == 0


def test_append_rejects_a_corrupt_batch(make_log: MakeLog) -> None:
    log = make_log()
    data = bytearray(encode_batch([Record(0, 1, b"k", b"v")]))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptDataError, match="CRC"):
        log.append_batches(bytes(data))
    assert log.log_end_offset == 0


def test_producer_batch_offsets_are_reassigned_in_place(make_log: MakeLog) -> None:
    log = make_log()
    log.append_records([plain()])
    raw = encode_batch(
        [Record(100, 1, b"k", b"v"), Record(101, 2, b"k", b"w")], producer_id=7, base_sequence=3
    )
    info = log.append_batches(raw)
    assert info.record_offsets == (1, 2)
    stored = next(log.read_batches(1))
    assert (stored.base_offset, stored.producer_id, stored.base_sequence) == (1, 7, 3)
    assert stored.is_crc_valid()


def test_flush_advances_the_recovery_point(make_log: MakeLog) -> None:
    log = make_log()
    log.append_records([plain()])
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 1
    eager = make_log(flush_messages=1)
    eager.append_records([plain()])
    assert eager.recovery_point == eager.log_end_offset


def test_aborted_transaction_goes_to_the_txn_index(make_log: MakeLog, clock: ManualClock) -> None:
    log = make_log()
    log.append_records([plain()])
    log.append_records(
        [keyed(b"a", b"1")], producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    assert log.last_stable_offset == 1
    marker = encode_end_txn_marker_batch(
        offset=0, producer_id=9, producer_epoch=0, commit=False, timestamp=clock.now_ms()
    )
    log.append_batches(marker)
    assert log.last_stable_offset == log.log_end_offset == 3
    assert log.active_segment.txn_index.all_aborted() == [AbortedTxn(9, 1, 2, 3)]
    assert [r.offset for r in log.read(0)] == [0, 1], "control records are not returned as data"


def test_clean_reopen_knows_largest_timestamp_without_scanning(make_log: MakeLog, open_log, clock) -> None:  # type: ignore[no-untyped-def]
    log = make_log(segment_bytes=200)
    for i in range(10):
        log.append_records([plain(timestamp=1000 + i)])
    segments_before = [(s.base_offset, s.size_bytes) for s in log.segments]
    log.close()
    reopened = open_log(segment_bytes=200, clean_shutdown=True).log
    assert [(s.base_offset, s.size_bytes) for s in reopened.segments] == segments_before
    assert reopened.log_end_offset == 10
    assert [s.largest_timestamp() for s in reopened.segments][-1] == (1009, "record")
    assert reopened.segments[0].largest_timestamp()[1] == "record"


def test_segment_without_timestamps_ages_by_mtime(make_log: MakeLog) -> None:
    log = make_log()
    log.append_records([plain()])
    segment = log.active_segment
    segment.set_last_modified_ms(123_000)
    assert segment.largest_timestamp() == (123_000, "mtime")


def test_read_skips_offsets_removed_by_compaction(log_dir: Path, open_log) -> None:  # type: ignore[no-untyped-def]
    """A missing offset (a gap left by compaction) reads as the next record."""
    batches = [
        encode_batch([Record(0, 1, b"a", b"0"), Record(1, 1, b"b", b"1")]),
        encode_batch([Record(5, 1, b"a", b"5")], base_offset=5),
        encode_batch([Record(8, 1, b"c", b"8")], base_offset=6, last_offset_delta=2),
    ]
    (log_dir / "00000000000000000000.log").write_bytes(b"".join(batches))
    log = open_log().log
    assert log.log_end_offset == 9
    assert [r.offset for r in log.read(2)] == [5, 8]
    assert [r.offset for r in log.read(6)] == [8]
    assert decode_batch(batches[2]).last_offset == 8


def test_time_based_roll_with_jitter(make_log: MakeLog, clock: ManualClock) -> None:
    """The roll comes segment.ms − jitter after the first batch, jitter fixed per segment."""
    log = make_log(segment_ms=HOUR_MS, segment_jitter_ms=1_200_000)
    log.append_records([plain(timestamp=clock.now_ms())])
    jitter = log.active_segment.rolling_jitter_ms
    assert 0 <= jitter < 1_200_000
    clock.advance(HOUR_MS - 1_200_000)
    log.append_records([plain(timestamp=clock.now_ms())])
    assert len(log.segments) == 1
    clock.advance(1_200_000 - jitter + 1)
    log.append_records([plain(timestamp=clock.now_ms())])
    assert len(log.segments) == 2


def test_full_offset_index_forces_a_roll(make_log: MakeLog) -> None:
    """segment.index.bytes = 36 holds four offset-index entries (appends 2–5); the sixth append rolls.

    The records carry no timestamp, so the time index stays empty and never fills first.
    """
    log = make_log(segment_index_bytes=36, index_interval_bytes=0)
    for _ in range(6):
        log.append_records([plain()])
    assert [s.base_offset for s in log.segments] == [0, 5]
    assert log.segments[0].offset_index.entries == 4


def test_relative_offset_overflow_forces_a_roll(log_dir: Path, open_log) -> None:  # type: ignore[no-untyped-def]
    """Offsets in a segment must fit base + int32: an append past that starts a new segment."""
    last_delta = 2**31 - 10
    big = encode_batch([Record(0, 1, b"k", b"v")], base_offset=0, last_offset_delta=last_delta)
    (log_dir / "00000000000000000000.log").write_bytes(big)
    log = open_log().log
    assert log.log_end_offset == last_delta + 1
    log.append_records([plain() for _ in range(5)])
    assert len(log.segments) == 1
    log.append_records([plain() for _ in range(20)])
    assert [s.base_offset for s in log.segments] == [0, last_delta + 6]


def test_size_bytes_follows_appends_rolls_and_deletions(make_log: MakeLog) -> None:
    """``size_bytes`` is kept, not summed: it must equal the segments' sum after every change."""
    log = make_log()

    def summed() -> int:
        return sum(s.size_bytes for s in log.segments)

    for n in range(6):
        log.append_records([keyed(b"k%d" % n, b"v" * n)])
        assert log.size_bytes == summed()
        if n % 2:
            log.roll()
            assert log.size_bytes == summed()
    log.delete_oldest_segments(2)
    assert log.size_bytes == summed() > 0
    log.append_records([keyed(b"last", b"v")])
    log.delete_oldest_segments(len(log.segments))  # every segment: the log rolls first
    assert log.size_bytes == summed() == 0

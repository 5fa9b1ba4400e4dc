"""``replication-offset-checkpoint``: where each log's high watermark starts, and what is written back.

Kafka's start-up: a partition the file lists starts at that high watermark, one it does not list at 0; the
log holds it within its log start and end offsets (``UnifiedLog.updateHighWatermark``). A dir without the
file was never a broker's: its logs start at their log end offset. Writing keeps the entries of partitions
that are not loaded in that dir, byte for byte in value.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from service.clock import ManualClock
from service.errors import InvalidInputError
from service.storage.checkpoints import decode_checkpoint, encode_checkpoint
from service.storage.clean_shutdown import remove_clean_shutdown_marker
from service.storage.high_watermark_checkpoint import read_high_watermarks, write_high_watermark_checkpoint
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.cleaner.test_native import legacy_message

T0, T1, MOVED = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("moved", 3)
HW_FILE = "replication-offset-checkpoint"


def make_logs(log_dir: Path, records: int = 20) -> None:
    """Partitions t-0 and t-1 with ``records`` records each, closed cleanly (no high watermark file)."""
    for tp in (T0, T1):
        (log_dir / f"{tp.topic}-{tp.partition}").mkdir(parents=True)
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(), clock=ManualClock(1_000))
    for log in loaded.logs.values():
        for i in range(records):
            log.append_records([Record(0, 1_000, b"k%d" % i, b"v")])
    close_log_dir(loaded)


def high_watermarks_after_load(log_dir: Path) -> dict[TopicPartition, int]:
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(), clock=ManualClock(1_000))
    try:
        return {tp: log.high_watermark for tp, log in loaded.logs.items()}
    finally:
        close_log_dir(loaded)


def test_a_missing_file_means_no_broker_wrote_the_dir(tmp_path: Path) -> None:
    found = read_high_watermarks(tmp_path)
    assert not found.exists and found.for_partition(T0) is None


def test_a_listed_partition_starts_at_its_entry_and_an_unlisted_one_at_zero(tmp_path: Path) -> None:
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 7}))
    found = read_high_watermarks(tmp_path)
    assert (found.for_partition(T0), found.for_partition(T1)) == (7, 0)
    (tmp_path / HW_FILE).write_bytes(b"")  # as a broker creates it before its first checkpoint
    assert read_high_watermarks(tmp_path).for_partition(T0) == 0


def test_the_load_bounds_the_high_watermark_by_the_log(tmp_path: Path) -> None:
    """Listed below the end: kept; listed past the end: the log end; unlisted: the log start offset."""
    make_logs(tmp_path)
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 12, MOVED: 5}))
    assert high_watermarks_after_load(tmp_path) == {T0: 12, T1: 0}
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 10_000, T1: 3}))
    assert high_watermarks_after_load(tmp_path) == {T0: 20, T1: 3}


def test_without_the_file_a_log_starts_at_its_end_and_the_close_writes_the_file(tmp_path: Path) -> None:
    make_logs(tmp_path)
    assert decode_checkpoint((tmp_path / HW_FILE).read_bytes()) == {T0: 20, T1: 20}, "written by the close"
    (tmp_path / HW_FILE).unlink()
    assert high_watermarks_after_load(tmp_path) == {T0: 20, T1: 20}


def test_an_append_moves_it_to_the_log_end_and_the_close_keeps_other_entries(tmp_path: Path) -> None:
    make_logs(tmp_path)
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 4, T1: 6, MOVED: 55}))
    loaded = load_log_dir(tmp_path, lambda _t: LogConfig(), clock=ManualClock(1_000))
    log = loaded.logs[T0]
    assert log.high_watermark == 4
    log.append_records([Record(0, 1_000, b"k", b"new")])
    assert log.high_watermark == log.log_end_offset == 21
    close_log_dir(loaded)
    assert decode_checkpoint((tmp_path / HW_FILE).read_bytes()) == {T0: 21, T1: 6, MOVED: 55}


def test_a_log_start_offset_above_the_entry_raises_the_high_watermark_to_it(tmp_path: Path) -> None:
    """Kafka's ``updateHighWatermark``: never below the log start offset."""
    make_logs(tmp_path)
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 2}))
    directory = tmp_path / "t-0"
    log = load_partition_log(
        directory, LogConfig(), clock=ManualClock(1_000), log_start_offset=9, high_watermark=2
    ).log
    assert (log.log_start_offset, log.high_watermark) == (9, 9)
    log.close()


def test_write_keeps_entries_not_managed_and_writes_each_logs_high_watermark(tmp_path: Path) -> None:
    make_logs(tmp_path)
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 4, MOVED: 55}))
    loaded = load_log_dir(tmp_path, lambda _t: LogConfig(), clock=ManualClock(1_000))
    assert loaded.kept_high_watermarks == {MOVED: 55}
    write_high_watermark_checkpoint(tmp_path, [loaded.logs[T1]], loaded.kept_high_watermarks)
    assert decode_checkpoint((tmp_path / HW_FILE).read_bytes()) == {T1: 0, MOVED: 55}
    close_log_dir(loaded)


@pytest.mark.parametrize(
    ("content", "line"),
    [(b"0\n2\nt 0 5\n", "line 2"), (b"0\n1\nt 0 five\n", "line 3"), (b"1\n0\n", "line 1")],
    ids=["count", "offset", "version"],
)
def test_a_malformed_file_stops_the_load_naming_file_and_line_and_writes_nothing(
    tmp_path: Path, content: bytes, line: str
) -> None:
    make_logs(tmp_path)
    (tmp_path / HW_FILE).write_bytes(content)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(InvalidInputError) as raised:
        load_log_dir(tmp_path, lambda _t: LogConfig(), clock=ManualClock(1_000))
    message = str(raised.value)
    assert str(tmp_path / HW_FILE) in message and line in message, message
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "the clean-shutdown marker is still there"
    assert (tmp_path / HW_FILE).read_bytes() == content


def test_a_partition_that_failed_to_load_keeps_its_line(tmp_path: Path) -> None:
    """Left out until an operator repairs it, it keeps its high watermark for the next load."""
    make_logs(tmp_path)
    broken = tmp_path / "bad-0"
    broken.mkdir()
    (broken / f"{0:020d}.log").write_bytes(legacy_message(0))  # fails the load (magic 0)
    remove_clean_shutdown_marker(tmp_path)  # its segment is then read at load
    bad = TopicPartition("bad", 0)
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 4, bad: 7}))
    loaded = load_log_dir(tmp_path, lambda _t: LogConfig(), clock=ManualClock(1_000))
    assert [f.topic_partition for f in loaded.failed] == [bad]
    assert loaded.kept_high_watermarks == {bad: 7}
    close_log_dir(loaded)
    assert decode_checkpoint((tmp_path / HW_FILE).read_bytes()) == {T0: 4, T1: 0, bad: 7}

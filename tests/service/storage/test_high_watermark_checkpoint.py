"""``replication-offset-checkpoint``: where each log's high watermark starts, and what is written back.

Kafka's start-up: a partition this node leads alone starts at its log end (``Partition.makeLeader``); any
other that the file lists at that high watermark, one it does not list at 0; the log holds it within its
log start and end offsets (``UnifiedLog.updateHighWatermark``). In a dir no broker wrote ``meta.properties``
into, logcleaner leads every partition alone. Writing keeps the entries of partitions that are not loaded in
that dir, byte for byte in value.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.base.errors import InvalidInputError
from service.storage.checkpoints import decode_checkpoint, encode_checkpoint
from service.storage.clean_shutdown import remove_clean_shutdown_marker
from service.storage.high_watermark_checkpoint import read_high_watermarks, write_high_watermark_checkpoint
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.cleaner.helpers import legacy_message

T0, T1, MOVED = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("moved", 3)
HW_FILE = "replication-offset-checkpoint"


def make_logs(log_dir: Path, records: int = 20, *, brokers: bool = True) -> None:
    """Partitions t-0 and t-1 with ``records`` records each, closed cleanly; ``brokers``: a broker's
    ``meta.properties`` (a ZooKeeper-era one: who leads is not known) beside them."""
    for tp in (T0, T1):
        (log_dir / f"{tp.topic}-{tp.partition}").mkdir(parents=True)
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(), clock=ManualClock(1_000))
    for log in loaded.logs.values():
        for i in range(records):
            log.append_records([Record(0, 1_000, b"k%d" % i, b"v")])
    close_log_dir(loaded)
    if brokers:
        (log_dir / "meta.properties").write_text("version=0\nbroker.id=3\n")


def high_watermarks_after_load(
    log_dir: Path, led_alone: frozenset[TopicPartition] = frozenset()
) -> dict[TopicPartition, tuple[int, str]]:
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(), clock=ManualClock(1_000), led_alone=led_alone)
    try:
        return {tp: (log.high_watermark, str(log.high_watermark_source)) for tp, log in loaded.logs.items()}
    finally:
        close_log_dir(loaded)


def test_the_leader_alone_starts_at_its_log_end_whatever_the_file_says(tmp_path: Path) -> None:
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 7}))
    found = read_high_watermarks(tmp_path)
    assert found.for_partition(T0, leads_alone=True) == (None, "leader-log-end")
    assert read_high_watermarks(tmp_path / "none").for_partition(T0, leads_alone=True) == (
        None,
        "leader-log-end",
    )


def test_a_listed_partition_starts_at_its_entry_and_an_unlisted_one_at_zero(tmp_path: Path) -> None:
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 7}))
    found = read_high_watermarks(tmp_path)
    assert found.for_partition(T0, leads_alone=False) == (7, "checkpoint")
    assert found.for_partition(T1, leads_alone=False) == (0, "no-checkpoint")
    (tmp_path / HW_FILE).write_bytes(b"")  # as a broker creates it before its first checkpoint
    assert read_high_watermarks(tmp_path).for_partition(T0, leads_alone=False) == (0, "no-checkpoint")
    assert read_high_watermarks(tmp_path / "none").for_partition(T0, leads_alone=False) == (
        0,
        "no-checkpoint",
    )


def test_the_load_bounds_the_high_watermark_by_the_log(tmp_path: Path) -> None:
    """Listed below the end: kept; listed past the end: the log end; unlisted: the log start offset."""
    make_logs(tmp_path)
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 12, MOVED: 5}))
    assert high_watermarks_after_load(tmp_path) == {T0: (12, "checkpoint"), T1: (0, "no-checkpoint")}
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 10_000, T1: 3}))
    assert high_watermarks_after_load(tmp_path) == {T0: (20, "checkpoint"), T1: (3, "checkpoint")}


def test_partitions_the_metadata_says_this_node_leads_alone_start_at_their_log_end(tmp_path: Path) -> None:
    make_logs(tmp_path)
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 12, T1: 3}))
    assert high_watermarks_after_load(tmp_path, frozenset({T0})) == {
        T0: (20, "leader-log-end"),
        T1: (3, "checkpoint"),
    }


def test_in_a_dir_logcleaner_made_every_log_starts_at_its_end(tmp_path: Path) -> None:
    """The empty file ``serve`` writes at its first checkpoint, then a kill: every record appended is
    still served (logcleaner is the only replica of its own logs)."""
    make_logs(tmp_path, brokers=False)
    assert decode_checkpoint((tmp_path / HW_FILE).read_bytes()) == {T0: 20, T1: 20}, "written by the close"
    for content in (b"0\n0\n", encode_checkpoint({T0: 3})):
        (tmp_path / HW_FILE).write_bytes(content)
        assert high_watermarks_after_load(tmp_path) == {
            T0: (20, "leader-log-end"),
            T1: (20, "leader-log-end"),
        }
    (tmp_path / HW_FILE).unlink()
    assert high_watermarks_after_load(tmp_path) == {T0: (20, "leader-log-end"), T1: (20, "leader-log-end")}


def test_an_append_moves_it_to_the_log_end_and_the_close_keeps_other_entries(tmp_path: Path) -> None:
    make_logs(tmp_path)
    (tmp_path / HW_FILE).write_bytes(encode_checkpoint({T0: 4, T1: 6, MOVED: 55}))
    loaded = load_log_dir(tmp_path, lambda _t: LogConfig(), clock=ManualClock(1_000))
    log = loaded.logs[T0]
    assert (log.high_watermark, log.high_watermark_source) == (4, "checkpoint")
    log.append_records([Record(0, 1_000, b"k", b"new")])
    assert log.high_watermark == log.log_end_offset == 21
    assert log.high_watermark_source == "leader-log-end"
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

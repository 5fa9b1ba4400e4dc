"""``load_log_dir`` and ``close_log_dir`` on real log dirs: Kafka's start-up and shutdown of one entry of
``log.dirs``. A clean close writes the checkpoints and the marker, and the next load honours the marker and
removes it; a partition that cannot load is listed as failed (the others load), and then the dir gets no
marker at close; stray dirs are left alone; a set ``stop`` ends the load; ``progress`` counts the logs found
and loaded. (Each corrupt-file case is in ``tests/api/test_load_failures.py``; the prescan, the lock and the
marker's bytes have their own files.)"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.load_progress import LoadProgress
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig
from service.storage.log_dir import LoadInterruptedError, close_log_dir, load_log_dir
from service.storage.log_files import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition

NOW_MS = 1_700_000_000_000


def config_for(_topic: str) -> LogConfig:
    return LogConfig()


def make_partition(log_dir: Path, name: str, records: int) -> None:
    """A partition dir holding ``records`` one-record batches, its log closed (no marker: the dir's)."""
    directory = log_dir / name
    directory.mkdir(parents=True)
    log = load_partition_log(directory, LogConfig(), clock=ManualClock(NOW_MS)).log
    for n in range(records):
        log.append_records([Record(0, NOW_MS, b"k", b"v%d" % n)])
    log.close()


def test_a_clean_close_is_honoured_by_the_next_load(tmp_path: Path) -> None:
    make_partition(tmp_path, "orders-0", 3)
    make_partition(tmp_path, "orders-1", 1)
    clock = ManualClock(NOW_MS)

    first = load_log_dir(tmp_path, config_for, clock=clock)
    assert not first.had_clean_shutdown
    assert {tp: log.log_end_offset for tp, log in first.logs.items()} == {
        TopicPartition("orders", 0): 3,
        TopicPartition("orders", 1): 1,
    }
    close_log_dir(first)
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT).read() == {
        TopicPartition("orders", 0): 3,
        TopicPartition("orders", 1): 1,
    }

    second = load_log_dir(tmp_path, config_for, clock=clock)
    assert second.had_clean_shutdown
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # removed once loaded: a crash now must recover
    assert second.logs[TopicPartition("orders", 0)].log_end_offset == 3
    close_log_dir(second)


def test_a_partition_that_cannot_load_is_failed_and_the_dir_gets_no_marker(tmp_path: Path) -> None:
    make_partition(tmp_path, "orders-0", 2)
    make_partition(tmp_path, "broken-0", 1)
    (tmp_path / "broken-0" / "00000000000000000abc.log").write_bytes(b"")  # not a segment's name

    loaded = load_log_dir(tmp_path, config_for, clock=ManualClock(NOW_MS))

    assert list(loaded.logs) == [TopicPartition("orders", 0)]
    [failed] = loaded.failed
    assert (
        failed.topic_partition == TopicPartition("broken", 0) and "00000000000000000abc.log" in failed.reason
    )
    close_log_dir(loaded)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # the broker's next start must recover it


def test_strays_are_left_alone_and_progress_counts_the_rest(tmp_path: Path) -> None:
    for name in ("orders-0", "orders-1", "stray-0"):
        make_partition(tmp_path, name, 1)
    progress = LoadProgress()

    loaded = load_log_dir(
        tmp_path, config_for, clock=ManualClock(NOW_MS), progress=progress, strays=[tmp_path / "stray-0"]
    )

    assert sorted(loaded.logs) == [TopicPartition("orders", 0), TopicPartition("orders", 1)]
    assert progress.counts == (2, 2)
    close_log_dir(loaded)
    assert (tmp_path / "stray-0" / f"{0:020d}.log").exists()


def test_a_set_stop_ends_the_load(tmp_path: Path) -> None:
    make_partition(tmp_path, "orders-0", 1)
    stop = threading.Event()
    stop.set()

    with pytest.raises(LoadInterruptedError):
        load_log_dir(tmp_path, config_for, clock=ManualClock(NOW_MS), stop=stop)

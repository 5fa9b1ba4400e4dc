"""``flush_leader_epochs_in_batch``: the leader-epoch checkpoints retention left unwritten, written for
many logs in one ``AtomicBatch``: every pending log's file gets its cache's entries, logs with nothing
pending are left alone, and one log that cannot be written is logged and skipped, not the others."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.storage.leader_epoch_checkpoint import EpochEntry, read_leader_epoch_checkpoint
from service.storage.leader_epoch_flush import flush_leader_epochs_in_batch
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record


def retained_log(directory: Path, clock: ManualClock, *, truncate: bool = True) -> PartitionLog:
    """Ten one-record batches in 3-batch segments, epochs 0@0 and 1@5; retention then deleted the oldest
    segment (log start 3), which cuts the cache to 0@3, 1@5 and leaves the file behind."""
    directory.mkdir(parents=True)
    log = load_partition_log(directory, LogConfig(segment_bytes=3 * 72), clock=clock).log
    for _ in range(10):
        log.append_records([Record(0, clock.now_ms(), None, b"test")])
    log.leader_epochs.assign(1, 5)
    if truncate:
        log.delete_oldest_segments(1)
        assert log.log_start_offset == 3
    return log


AFTER = [EpochEntry(0, 3), EpochEntry(1, 5)]
BEFORE = [EpochEntry(0, 0), EpochEntry(1, 5)]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def test_every_pending_checkpoint_is_written(tmp_path: Path, clock: ManualClock) -> None:
    logs = [retained_log(tmp_path / f"t-{i}", clock) for i in range(5)]
    assert all(read_leader_epoch_checkpoint(log.directory) == BEFORE for log in logs), "left behind"
    assert flush_leader_epochs_in_batch(logs, threads=2) == 5
    for log in logs:
        assert read_leader_epoch_checkpoint(log.directory) == AFTER
        assert not log.has_unflushed_leader_epochs
        assert not [p.name for p in log.directory.iterdir() if p.name.endswith(".tmp")]
    assert flush_leader_epochs_in_batch(logs) == 0, "nothing left to write"


def test_logs_with_nothing_pending_are_left_alone(tmp_path: Path, clock: ManualClock) -> None:
    untouched = retained_log(tmp_path / "t-0", clock, truncate=False)
    marker = untouched.directory / "leader-epoch-checkpoint"
    marker.write_bytes(b"marker")
    assert flush_leader_epochs_in_batch([untouched]) == 0
    assert flush_leader_epochs_in_batch([]) == 0
    assert marker.read_bytes() == b"marker"


def test_a_log_that_cannot_be_written_does_not_stop_the_others(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A log whose dir went away (its stage fails) is logged and skipped; the rest are written."""
    logs = [retained_log(tmp_path / f"t-{i}", clock) for i in range(3)]
    shutil.rmtree(logs[1].directory)
    with caplog.at_level(logging.WARNING, logger="service.storage.leader_epoch_flush"):
        assert flush_leader_epochs_in_batch(logs, threads=1) == 2
    assert read_leader_epoch_checkpoint(logs[0].directory) == AFTER
    assert read_leader_epoch_checkpoint(logs[2].directory) == AFTER
    assert [r.getMessage() for r in caplog.records if "Could not write the leader-epoch" in r.getMessage()]


def test_a_closed_log_writes_nothing_more(tmp_path: Path, clock: ManualClock) -> None:
    """Its close wrote the checkpoint already: the batch has nothing to write for it."""
    closed, open_ = retained_log(tmp_path / "t-0", clock), retained_log(tmp_path / "t-1", clock)
    closed.close()
    assert read_leader_epoch_checkpoint(closed.directory) == AFTER
    assert flush_leader_epochs_in_batch([closed, open_]) == 1
    assert read_leader_epoch_checkpoint(open_.directory) == AFTER

"""Producer snapshots, the leader-epoch cache and partition.metadata as a log lives: load, append, roll,
retention, close, reload (much as Kafka's ``UnifiedLogTest``, ``LogLoaderTest`` and
``ProducerStateManagerTest`` check them)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from service.base.clock import ManualClock
from service.core.log_manager import LogManager
from service.core.tasks import ManualTaskScheduler
from service.storage.atomic_batch import AtomicBatch
from service.storage.control import encode_end_txn_marker_batch
from service.storage.leader_epoch_checkpoint import EpochEntry, read_leader_epoch_checkpoint
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.partition_metadata import write_partition_metadata
from service.storage.producer_snapshot import (
    ProducerSnapshotEntry,
    list_snapshot_offsets,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)
from service.storage.records import Record

START_MS = 1_700_000_000_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    path = tmp_path / "topic-0"
    path.mkdir()
    return path


def open_log(directory: Path, clock: ManualClock, *, clean: bool = False, **config: Any) -> PartitionLog:
    return load_partition_log(
        directory,
        LogConfig(**config),
        clock=clock,
        clean_shutdown=clean,
    ).log


def reopen(log: PartitionLog, clock: ManualClock) -> PartitionLog:
    """Close cleanly and load again as after a clean shutdown (recovery point = log end offset)."""
    log.close()
    return load_partition_log(log.directory, log.config, clock=clock, clean_shutdown=True).log


def idem(log: PartitionLog, pid: int, seq: int, value: bytes, *, txn: bool = False, ts: int = -1) -> None:
    log.append_records(
        [Record(0, ts, value, value)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=txn,
    )


def marker(log: PartitionLog, pid: int, *, commit: bool, coordinator_epoch: int = 0) -> None:
    log.append_batches(
        encode_end_txn_marker_batch(
            offset=0,
            producer_id=pid,
            producer_epoch=0,
            commit=commit,
            timestamp=START_MS,
            coordinator_epoch=coordinator_epoch,
        )
    )


def retention(clock: ManualClock) -> tuple[LogManager, ManualTaskScheduler]:
    scheduler = ManualTaskScheduler(clock)
    return LogManager([], lambda _topic: LogConfig(), clock=clock, scheduler=scheduler), scheduler


# -- producer snapshots -----------------------------------------------------------------------------


def test_snapshot_at_each_roll_and_on_close(directory: Path, clock: ManualClock) -> None:
    log = open_log(directory, clock)
    idem(log, 1, 0, b"a")
    log.roll()
    idem(log, 1, 1, b"b")
    log.roll()
    idem(log, 1, 2, b"c")
    assert list_snapshot_offsets(directory) == [1, 2]
    assert read_snapshot(snapshot_path(directory, 2)) == [ProducerSnapshotEntry(1, 0, 1, 1, 0, -1, -1, -1)]
    log.close()
    assert list_snapshot_offsets(directory) == [1, 2, 3]
    [entry] = read_snapshot(snapshot_path(directory, 3))
    assert (entry.producer_id, entry.last_sequence, entry.last_offset) == (1, 2, 2)


def test_an_open_transaction_survives_a_clean_restart(directory: Path, clock: ManualClock) -> None:
    log = open_log(directory, clock, segment_bytes=200)
    idem(log, 1, 0, b"a")
    idem(log, 7, 0, b"t1", txn=True)  # opens at offset 1
    idem(log, 1, 1, b"b")
    idem(log, 8, 0, b"t2", txn=True)
    marker(log, 8, commit=True, coordinator_epoch=4)
    idem(log, 1, 2, b"c")
    assert len(log.segments) > 2
    before = (log.last_stable_offset, log.producer_state.first_unstable_offset())
    assert before == (1, 1)
    entries = log.producer_state.snapshot_entries()

    log = reopen(log, clock)
    assert (log.last_stable_offset, log.producer_state.first_unstable_offset()) == before
    assert log.producer_state.snapshot_entries() == entries
    assert [e.coordinator_epoch for e in entries if e.producer_id == 8] == [4]

    marker(log, 7, commit=False)
    assert log.last_stable_offset == log.log_end_offset
    assert [t.first_offset for s in log.segments for t in s.txn_index.all_aborted()] == [1]


def test_load_starts_from_the_newest_snapshot_and_replays_only_what_follows(
    directory: Path, clock: ManualClock
) -> None:
    log = open_log(directory, clock)
    idem(log, 1, 0, b"a")
    log.roll()
    idem(log, 2, 0, b"b")
    log.roll()
    idem(log, 3, 0, b"c")
    log.close()
    for offset in list_snapshot_offsets(directory):
        snapshot_path(directory, offset).unlink()
    # A snapshot at 2 that knows producer 99 (not in the log) and not producers 1 and 2: if load used it
    # and replayed only the segment from offset 2 on, the state is producers 3 and 99.
    write_snapshot(directory, 2, [ProducerSnapshotEntry(99, 0, 0, 0, 0, -1, -1)])
    log = load_partition_log(directory, LogConfig(), clock=clock, recovery_point=3).log
    assert log.producer_state.producer_ids == [3, 99]


def test_a_corrupt_snapshot_is_reported_and_the_state_rebuilt_from_the_segments(
    directory: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(directory, clock)
    idem(log, 1, 0, b"a")
    log.roll()
    idem(log, 2, 0, b"b")
    idem(log, 3, 0, b"t", txn=True)
    log.close()
    path = snapshot_path(directory, 3)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.ERROR):
        log = load_partition_log(directory, LogConfig(), clock=clock, clean_shutdown=True).log
        assert caplog.text == ""  # a clean load reads the snapshot at the log end offset on first use
        assert log.producer_state.producer_ids == [1, 2, 3]
    assert f"{path}, position 2: producer snapshot CRC mismatch" in caplog.text
    assert log.producer_state.producer_ids == [1, 2, 3]  # snapshot 1 (producer 1) + replay from 1
    assert log.last_stable_offset == 2
    assert not path.exists()


def test_a_snapshot_of_an_unknown_version_is_reported_and_the_state_rebuilt(
    directory: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(directory, clock)
    idem(log, 1, 0, b"a")
    idem(log, 2, 0, b"t", txn=True)
    log.close()
    path = snapshot_path(directory, 2)
    data = bytearray(path.read_bytes())
    data[1] = 7  # the version is outside the CRC: only the version check can catch it
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.ERROR):
        log = load_partition_log(directory, LogConfig(), clock=clock, clean_shutdown=True).log
        assert log.producer_state.producer_ids == [1, 2]
    assert f"{path}, position 0: producer snapshot version 7 is not supported" in caplog.text
    assert log.producer_state.producer_ids == [1, 2]  # replayed from the segment
    assert log.last_stable_offset == 1  # the open transaction is back


def test_stray_snapshots_are_removed_on_load(directory: Path, clock: ManualClock) -> None:
    log = open_log(directory, clock)
    idem(log, 1, 0, b"a")
    log.roll()
    idem(log, 1, 1, b"b")
    idem(log, 1, 2, b"c")
    log.close()  # snapshots 1 (roll) and 3 (close, above the last segment base)
    write_snapshot(directory, 2, [])  # names no segment and is not the newest
    write_snapshot(directory, 9, [])  # past the log end offset
    open_log(directory, clock, clean=True)
    assert list_snapshot_offsets(directory) == [1, 3]


def test_retention_deletes_producer_snapshots(directory: Path, clock: ManualClock) -> None:
    manager, scheduler = retention(clock)
    log = open_log(directory, clock, segment_bytes=10240, retention_bytes=0, file_delete_delay_ms=0)
    idem(log, 1, 0, b"a")
    log.roll()
    idem(log, 1, 1, b"b")
    log.roll()
    idem(log, 1, 2, b"c")
    assert len(list_snapshot_offsets(directory)) == 2
    clock.advance(60_001)
    manager.delete_old_segments(log)
    scheduler.advance(1)
    assert len(list_snapshot_offsets(directory)) == 1
    assert not list(directory.glob("*.deleted"))
    assert log.log_start_offset == 3
    assert log.producer_state.producer_ids == [1]  # deleting segments removes no producer


def test_snapshots_go_with_their_segments_after_file_delete_delay_ms(
    directory: Path, clock: ManualClock
) -> None:
    manager, scheduler = retention(clock)
    log = open_log(directory, clock, segment_bytes=10240, retention_bytes=0, file_delete_delay_ms=30_000)
    idem(log, 1, 0, b"a")
    log.roll()
    idem(log, 1, 1, b"b")
    log.roll()
    assert list_snapshot_offsets(directory) == [1, 2]
    manager.delete_old_segments(log)  # the segments at 0 and 1 go; snapshot 1 is named by segment 1
    assert list_snapshot_offsets(directory) == [2]
    marked = directory / f"{1:020d}.snapshot.deleted"
    assert marked.exists()  # renamed at once, like the segment's files
    scheduler.advance(29_999)
    assert marked.exists() and (directory / f"{1:020d}.log.deleted").exists()
    scheduler.advance(1)
    assert not marked.exists() and not list(directory.glob("*.deleted"))
    assert list_snapshot_offsets(directory) == [2]


def test_log_start_offset_movement_deletes_snapshots(directory: Path, clock: ManualClock) -> None:
    manager, scheduler = retention(clock)
    log = open_log(directory, clock, segment_bytes=10240, file_delete_delay_ms=0)
    idem(log, 1, 0, b"a")
    log.roll()
    idem(log, 1, 1, b"b")
    log.roll()
    idem(log, 1, 2, b"c")
    log.increment_log_start_offset(log.log_end_offset - 1)
    manager.delete_old_segments(log)
    scheduler.advance(1)
    assert list_snapshot_offsets(directory) == [2]


def test_segment_deletion_keeps_producers(directory: Path, clock: ManualClock) -> None:
    manager, _ = retention(clock)
    log = open_log(directory, clock)
    idem(log, 1, 0, b"a")
    batch_bytes = log.size_bytes
    log = reopen(log, clock)
    log.config = LogConfig(segment_bytes=batch_bytes, retention_bytes=2 * batch_bytes)
    idem(log, 2, 0, b"b")
    idem(log, 2, 1, b"c")
    assert len(log.segments) == 3
    manager.delete_old_segments(log)
    assert len(log.segments) == 2
    assert log.producer_state.producer_ids == [1, 2]


def test_producer_expiry_spares_open_transactions(directory: Path, clock: ManualClock) -> None:
    log = open_log(directory, clock)
    idem(log, 1, 0, b"a", ts=START_MS)
    idem(log, 2, 0, b"t", txn=True, ts=START_MS)
    idem(log, 3, 0, b"b", ts=START_MS + 500)
    clock.advance(1000)
    assert log.remove_expired_producers(1000) == [1]
    assert log.producer_state.producer_ids == [2, 3]
    clock.advance(500)
    assert log.remove_expired_producers(1000) == [3]


# -- leader-epoch cache -----------------------------------------------------------------------------


def test_appends_carry_the_current_epoch_and_the_first_one_adds_its_entry(
    directory: Path, clock: ManualClock
) -> None:
    log = open_log(directory, clock)
    assert read_leader_epoch_checkpoint(directory) == []  # created with the log, empty
    idem(log, 1, 0, b"a")
    idem(log, 1, 1, b"b")
    assert read_leader_epoch_checkpoint(directory) == [EpochEntry(0, 0)]
    log.leader_epochs.assign(3, log.log_end_offset)
    idem(log, 1, 2, b"c")
    assert [b.partition_leader_epoch for s in log.segments for b in s.batches()] == [0, 0, 3]
    assert read_leader_epoch_checkpoint(directory) == [EpochEntry(0, 0), EpochEntry(3, 2)]
    log = reopen(log, clock)
    assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(3, 2)]


def log_past_retention(directory: Path, clock: ManualClock) -> PartitionLog:
    """The log of Kafka's ``UnifiedLogTest.testDeleteOldSegments``: 100 one-record batches in 360-byte
    segments, all past retention; epochs 0@0 and 1@90."""
    log = open_log(directory, clock, segment_bytes=360, segment_index_bytes=1000, retention_ms=999)
    for _ in range(100):
        log.append_records([Record(0, START_MS - 1000, None, b"test")])
    log.leader_epochs.assign(1, 90)
    return log


def test_retention_truncates_the_epoch_cache_from_the_start(directory: Path, clock: ManualClock) -> None:
    """The cache at once; the file with the pass's delayed file deletion (Kafka's async flush), so that a
    retention pass pays no fsync per log. A crash before that write loses nothing: the next load cuts the
    older entries from the log start offset again."""
    manager, scheduler = retention(clock)
    log = log_past_retention(directory, clock)
    manager.delete_old_segments(log)
    assert len(log.segments) == 1 and log.log_start_offset == 100
    assert log.leader_epochs.entries == [EpochEntry(1, 100)]
    assert read_leader_epoch_checkpoint(directory) == [EpochEntry(0, 0), EpochEntry(1, 90)]  # not yet
    killed = directory.parent / "killed" / directory.name
    shutil.copytree(directory, killed)  # a kill now: the segments renamed, the checkpoint not yet written
    scheduler.advance(LogConfig().file_delete_delay_ms)
    assert read_leader_epoch_checkpoint(directory) == [EpochEntry(1, 100)]
    after_kill = load_partition_log(killed, log.config, clock=clock, recovery_point=100).log
    assert after_kill.log_start_offset == 100
    assert after_kill.leader_epochs.entries == [EpochEntry(1, 100)]
    assert (
        after_kill.has_unflushed_leader_epochs
    )  # an unclean load cuts in memory too: the LogManager's batch
    after_kill.flush_leader_epochs()
    assert read_leader_epoch_checkpoint(killed) == [EpochEntry(1, 100)]


def test_retention_after_a_clean_load_leaves_the_epoch_file_to_the_delayed_task_too(
    directory: Path, clock: ManualClock
) -> None:
    """After a clean load the checkpoint is read at first use, here retention's: cut in memory only."""
    manager, scheduler = retention(clock)
    log = reopen(log_past_retention(directory, clock), clock)  # the epoch checkpoint left unread
    manager.delete_old_segments(log)
    assert log.leader_epochs.entries == [EpochEntry(1, 100)]
    assert read_leader_epoch_checkpoint(directory) == [EpochEntry(0, 0), EpochEntry(1, 90)]
    scheduler.advance(LogConfig().file_delete_delay_ms)
    assert read_leader_epoch_checkpoint(directory) == [EpochEntry(1, 100)]


def test_a_shutdown_writes_the_epoch_truncations_retention_left(directory: Path, clock: ManualClock) -> None:
    log_past_retention(directory, clock).close()
    config = LogConfig(segment_bytes=360, segment_index_bytes=1000, retention_ms=999)
    manager = LogManager(
        [directory.parent], lambda _t: config, clock=clock, scheduler=ManualTaskScheduler(clock)
    )
    manager.startup()
    [log] = manager.logs.values()
    manager.delete_old_segments(log)
    assert log.has_unflushed_leader_epochs
    manager.shutdown()  # before the delayed deletion ran
    assert read_leader_epoch_checkpoint(directory) == [EpochEntry(1, 100)]


def manager_over_logs_past_retention(log_dir: Path, clock: ManualClock, count: int) -> LogManager:
    for n in range(count):
        (log_dir / f"topic-{n}").mkdir(parents=True, exist_ok=True)
        log_past_retention(log_dir / f"topic-{n}", clock).close()
    config = LogConfig(segment_bytes=360, segment_index_bytes=1000, retention_ms=999)
    manager = LogManager([log_dir], lambda _t: config, clock=clock, scheduler=ManualTaskScheduler(clock))
    manager.startup()
    return manager


def test_a_retention_pass_writes_the_epoch_checkpoints_it_cut_in_one_batch(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Right after the pass, as Kafka's asynchronous flush does, not with each delayed file deletion."""
    manager = manager_over_logs_past_retention(tmp_path / "logs", clock, 3)
    assert {d.partition for d in manager.cleanup_logs()} == {0, 1, 2}
    for log in manager.logs.values():
        assert not log.has_unflushed_leader_epochs
        assert read_leader_epoch_checkpoint(log.directory) == [EpochEntry(1, 100)]
        assert sorted(p.name for p in log.directory.glob("*.tmp")) == []
    manager.shutdown()


def test_a_kill_at_any_step_of_the_epoch_batch_loses_nothing(tmp_path: Path, clock: ManualClock) -> None:
    """The batch's steps driven one by one, the log dir copied after each (what a kill leaves): every
    copy loads with the cut entries, each file holding its old entries or its new ones."""
    log_dir = tmp_path / "logs"
    manager = manager_over_logs_past_retention(log_dir, clock, 3)
    logs = sorted(manager.logs.values(), key=lambda log: log.directory.name)
    for log in logs:
        log.append_records([Record(0, START_MS, None, b"new")] * 3)  # a recovery keeps epoch 1 then
        manager.delete_old_segments(log)
        assert log.leader_epochs.entries == [EpochEntry(1, 100)]
    copies: list[Path] = []

    def kill_now() -> None:
        copies.append(tmp_path / f"killed-{len(copies)}")
        shutil.copytree(log_dir, copies[-1])

    batch = AtomicBatch()
    tokens = []
    for log in logs:
        tokens.append(log.stage_leader_epochs(batch))
        kill_now()
    batch.sync()
    kill_now()
    for log, token in zip(logs, tokens, strict=True):
        assert token is not None and log.commit_leader_epochs(batch, token)
        kill_now()
    batch.finish()
    old, new = [EpochEntry(0, 0), EpochEntry(1, 90)], [EpochEntry(1, 100)]
    files = [[read_leader_epoch_checkpoint(c / log.directory.name) for log in logs] for c in copies]
    assert all(entries in (old, new) for copy in files for entries in copy)
    assert files[3] == [old] * 3 and files[4:] == [[new, old, old], [new, new, old], [new] * 3]
    for copy in copies:  # loaded as after a kill (no marker: recovery), which writes its own cut
        for log in logs:
            after_kill = load_partition_log(copy / log.directory.name, log.config, clock=clock).log
            assert after_kill.log_start_offset == 100
            assert after_kill.leader_epochs.entries == new
    manager.shutdown()


def test_an_epoch_change_between_stage_and_commit_wins_over_the_batch(
    directory: Path, clock: ManualClock
) -> None:
    manager, _ = retention(clock)
    log = log_past_retention(directory, clock)
    manager.delete_old_segments(log)
    batch = AtomicBatch()
    token = log.stage_leader_epochs(batch)
    assert token is not None
    log.leader_epochs.assign(2, log.log_end_offset)  # written at once, through the same .tmp name
    batch.sync()
    assert not log.commit_leader_epochs(batch, token)
    batch.finish()
    assert read_leader_epoch_checkpoint(directory) == log.leader_epochs.entries == [EpochEntry(2, 100)]
    assert not (directory / "leader-epoch-checkpoint.tmp").exists()
    assert not log.has_unflushed_leader_epochs


def test_a_close_writes_the_epoch_truncation_retention_left(directory: Path, clock: ManualClock) -> None:
    manager, _ = retention(clock)
    log = log_past_retention(directory, clock)
    manager.delete_old_segments(log)
    log.close()  # before the delayed deletion ran
    assert read_leader_epoch_checkpoint(directory) == [EpochEntry(1, 100)]


def test_delete_records_truncates_the_epoch_cache_from_the_start(directory: Path, clock: ManualClock) -> None:
    log = open_log(directory, clock)
    for _ in range(5):
        idem(log, 1, log.log_end_offset, b"x")
    log.leader_epochs.assign(2, 3)
    log.increment_log_start_offset(2)
    assert read_leader_epoch_checkpoint(directory) == [EpochEntry(0, 2), EpochEntry(2, 3)]


def test_a_corrupt_epoch_checkpoint_is_rebuilt_from_the_batches(
    directory: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(directory, clock)
    idem(log, 1, 0, b"a")
    log.leader_epochs.assign(4, 1)
    idem(log, 1, 1, b"b")
    log.close()
    (directory / "leader-epoch-checkpoint").write_bytes(b"0\n5\n")
    with caplog.at_level(logging.ERROR):
        log = open_log(directory, clock, clean=True)
        assert caplog.text == ""  # a clean load reads the checkpoint on first use
        assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(4, 1)]
    assert "leader-epoch-checkpoint" in caplog.text and "rebuilding" in caplog.text
    assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(4, 1)]
    assert read_leader_epoch_checkpoint(directory) == [EpochEntry(0, 0), EpochEntry(4, 1)]


def test_recovery_truncates_the_epoch_cache_from_the_end(directory: Path, clock: ManualClock) -> None:
    log = open_log(directory, clock)
    idem(log, 1, 0, b"a")
    log.leader_epochs.assign(2, 1)
    idem(log, 1, 1, b"b")
    log.flush()
    size = log.active_segment.log_path.stat().st_size
    log.close()
    with open(log.active_segment.log_path, "r+b") as file:  # tear the last batch
        file.truncate(size - 5)
    log = open_log(directory, clock)  # unclean: recovery cuts the torn batch
    assert log.log_end_offset == 1
    assert log.leader_epochs.entries == [EpochEntry(0, 0)]
    assert list_snapshot_offsets(directory) == []  # the close snapshot at 2 is past the end


# -- partition.metadata ------------------------------------------------------------------------------


def test_partition_metadata_is_kept_and_a_malformed_one_only_logged(
    directory: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    write_partition_metadata(directory, "AAAAAAAAAAEAAAAAAAAAAg")
    before = os.stat(directory / "partition.metadata").st_mtime_ns
    log = open_log(directory, clock)
    assert log.topic_id == "AAAAAAAAAAEAAAAAAAAAAg"
    log.close()
    assert os.stat(directory / "partition.metadata").st_mtime_ns == before
    (directory / "partition.metadata").write_bytes(b"version: 0\ntopic_id: ???")
    with caplog.at_level(logging.ERROR):
        log = open_log(directory, clock, clean=True)
    assert log.topic_id is None
    assert f"{directory / 'partition.metadata'}, position 11" in caplog.text
    assert (directory / "partition.metadata").read_bytes() == b"version: 0\ntopic_id: ???"


# -- reads deferred by a clean load ------------------------------------------------------------------


def test_a_clean_load_reads_the_deferred_files_on_first_use_only(directory: Path, clock: ManualClock) -> None:
    write_partition_metadata(directory, "AAAAAAAAAAEAAAAAAAAAAg")
    log = open_log(directory, clock)
    idem(log, 1, 0, b"a")
    idem(log, 2, 0, b"t", txn=True)  # an open transaction: the last stable offset is 1
    log.leader_epochs.assign(3, log.log_end_offset)
    idem(log, 1, 1, b"b")
    log.close()
    log = open_log(directory, clock, clean=True)
    # Changed after the load: what the log reports is what it reads at first use, not at load.
    write_partition_metadata(directory, "AAAAAAAAAAEAAAAAAAAAAw")
    assert log.topic_id == "AAAAAAAAAAEAAAAAAAAAAw"
    assert log.leader_epochs.entries == [EpochEntry(0, 0), EpochEntry(3, 2)]
    assert log.last_stable_offset == 1
    assert log.producer_state.producer_ids == [1, 2]


def test_a_closed_or_offline_log_reads_no_deferred_file(directory: Path, clock: ManualClock) -> None:
    """Its dir may be renamed for deletion or on a failed disk: it answers as a dir without the files."""
    write_partition_metadata(directory, "AAAAAAAAAAEAAAAAAAAAAg")
    log = open_log(directory, clock)
    idem(log, 2, 0, b"t", txn=True)
    log.close()
    offline = open_log(directory, clock, clean=True)
    offline.take_offline("an I/O error")
    assert offline.topic_id is None
    assert offline.last_stable_offset == offline.high_watermark
    offline.abandon()
    log = open_log(directory, clock, clean=True)
    log.close(deleted=True)
    renamed = directory.rename(directory.with_name(directory.name + ".x-delete"))
    assert log.topic_id is None
    assert log.last_stable_offset == log.high_watermark
    assert log.leader_epochs.entries == []
    assert (renamed / "partition.metadata").exists()


@pytest.mark.parametrize("cut_by", ["the task", "the shutdown"])
def test_an_unclean_start_cuts_the_epoch_files_after_the_load_in_one_batch(
    tmp_path: Path, clock: ManualClock, cut_by: str
) -> None:
    """Kafka's ``truncateFromEndAsyncFlush``: after an unclean stop the load reads no leader-epoch
    checkpoint (as after a clean one), and a one-off task the LogManager schedules once the logs loaded
    reads every recovered log's, cuts it to its log end and writes the cut files in one batch (10,000 logs
    one at a time doubled a start); a stop before the task does the same before its marker. A kill before
    either loses nothing: the next load cuts the same entries again."""
    log_dir = tmp_path / "logs"
    directories = [log_dir / f"topic-{i}" for i in range(3)]
    for directory in directories:
        directory.mkdir(parents=True)
        log = open_log(directory, clock)
        log.append_records([Record(0, START_MS, None, b"v")])
        log.leader_epochs.assign(3, 7)  # an epoch past the log end, as a replica truncated on restart has
        log.close()
    config = LogConfig()
    scheduler = ManualTaskScheduler(clock)
    manager = LogManager([log_dir], lambda _t: config, clock=clock, scheduler=scheduler)
    manager.startup()
    assert not any(log.has_unflushed_leader_epochs for log in manager.logs.values()), "none read at load"
    killed = tmp_path / "killed"
    shutil.copytree(log_dir, killed)  # a kill now: nothing cut yet
    if cut_by == "the task":
        assert scheduler.tick() == 1  # the one task, due at once
        assert all(log.leader_epochs.entries == [EpochEntry(0, 0)] for log in manager.logs.values())
        assert not any(log.has_unflushed_leader_epochs for log in manager.logs.values())
    manager.shutdown()
    for directory in directories:
        assert read_leader_epoch_checkpoint(directory) == [EpochEntry(0, 0)]
    after_kill = load_partition_log(killed / "topic-0", config, clock=clock).log
    assert after_kill.leader_epochs.entries == [EpochEntry(0, 0)]

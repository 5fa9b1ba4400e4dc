"""CleanerManager against the cases of Kafka's LogCleanerManagerTest, on real logs."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pytest

from cleaner.errors import IllegalCleanerStateError
from cleaner.pool.manager import CleanerManager
from service.base.clock import ManualClock
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition

COMPACT = frozenset({"compact"})


class Logs:
    """A few compacted partitions in one log dir; ``add`` writes ``segments`` full 2-record segments."""

    def __init__(self, directory: Path, clock: ManualClock) -> None:
        self.directory = directory
        self.clock = clock
        self.logs: dict[TopicPartition, PartitionLog] = {}

    def add(self, partition: int, segments: int, *, policy: frozenset[str] = COMPACT) -> PartitionLog:
        path = self.directory / f"t-{partition}"
        path.mkdir()
        config = LogConfig(segment_bytes=160, cleanup_policy=policy)
        log = load_partition_log(path, config, clock=self.clock).log
        for i in range(segments * 2 + 1):
            log.append_records([Record(0, self.clock.now_ms(), b"k%d" % (i % 3), b"v")])
        self.logs[log.topic_partition] = log
        return log

    def checkpoint(self) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(self.directory / "cleaner-offset-checkpoint")


@pytest.fixture
def logs(tmp_path: Path) -> Logs:
    return Logs(tmp_path, ManualClock())


def manager_for(logs: Logs) -> CleanerManager:
    return CleanerManager(lambda: dict(logs.logs), logs.clock)


def test_grabs_the_log_with_the_highest_dirty_ratio(logs: Logs) -> None:
    """The dirtiest wins; uncleanable and in-progress partitions are skipped."""
    p0, p1, p2 = (logs.add(p, 4) for p in range(3))
    # p0 fully clean, p1 dirty from offset 2 (ratio 0.75), p2 never cleaned (ratio 1.0)
    logs.checkpoint().write({p0.topic_partition: p0.segments[-1].base_offset, p1.topic_partition: 2})
    manager = manager_for(logs)
    chosen = manager.grab_filthiest_compacted_log()
    assert chosen is not None and chosen.log is p2
    assert manager.max_dirty_percent == 100
    assert manager.grab_filthiest_compacted_log() is not None  # p1 next: p2 is in progress
    assert manager.in_progress == [p1.topic_partition, p2.topic_partition]
    assert manager.grab_filthiest_compacted_log() is None, "p0 has nothing to clean"
    manager.done_cleaning(p1, 8)
    manager.mark_uncleanable(p1, 100, "CorruptDataError: a test's")
    assert manager.grab_filthiest_compacted_log() is None
    assert (
        manager.uncleanable() == {logs.directory.resolve(): {p1.topic_partition: 100}}
        or manager.uncleanable()
    )


def test_ratio_must_be_strictly_above_the_minimum(logs: Logs) -> None:
    log = logs.add(0, 4)  # four 2-record segments + the active one
    logs.checkpoint().write({log.topic_partition: log.segments[2].base_offset})  # 2 of 4 cleanable: 0.5
    assert manager_for(logs).grab_filthiest_compacted_log() is None
    logs.checkpoint().write({log.topic_partition: log.segments[1].base_offset})  # 0.75
    assert manager_for(logs).grab_filthiest_compacted_log() is not None


def test_invalid_checkpoints_are_reset_and_rewritten(logs: Logs) -> None:
    """A checkpoint past the log end resets to the log start and is rewritten at once."""
    log = logs.add(0, 3)
    logs.checkpoint().write({log.topic_partition: 200})
    chosen = manager_for(logs).grab_filthiest_compacted_log()
    assert chosen is not None and chosen.to_clean.first_dirty_offset == 0
    assert logs.checkpoint().read() == {log.topic_partition: 0}


def test_non_compacted_logs_are_never_candidates(logs: Logs) -> None:
    logs.add(0, 3, policy=frozenset({"delete"}))
    manager = manager_for(logs)
    assert manager.grab_filthiest_compacted_log() is None
    assert manager.grab_logs_for_retention() == []


def test_state_transitions(logs: Logs) -> None:
    """Pause, resume and done follow the transition table of cleaner/pool/manager.py; other moves raise."""
    log = logs.add(0, 3)
    tp = log.topic_partition
    manager = manager_for(logs)
    with pytest.raises(IllegalCleanerStateError):
        manager.done_cleaning(log, 5)  # from none
    manager.abort_and_pause(tp)
    manager.abort_and_pause(tp)
    assert manager.state_of(tp) is not None and manager.state_of(tp).paused == 2  # type: ignore[union-attr]
    assert manager.grab_filthiest_compacted_log() is None, "a paused log is not cleaned"
    manager.resume(tp)
    manager.resume(tp)
    assert manager.state_of(tp) is None
    with pytest.raises(IllegalCleanerStateError):
        manager.resume(tp)
    candidate = manager.candidate_for(tp)
    assert manager.in_progress == [tp]
    manager.done_cleaning(candidate.log, 6)
    assert logs.checkpoint().read() == {tp: 6}
    [retained] = manager.grab_logs_for_retention()
    manager.done_deleting([retained])
    assert manager.state_of(tp) is None


def test_abort_of_a_running_round_waits_until_it_stops(logs: Logs) -> None:
    import threading

    log = logs.add(0, 3)
    manager = manager_for(logs)
    candidate = manager.candidate_for(log.topic_partition)
    aborted = threading.Event()

    def round_that_notices() -> None:
        while not manager.is_aborted(log.topic_partition):
            pass
        aborted.set()
        manager.done_cleaning(candidate.log, None)  # Aborted → Paused(1), no checkpoint

    worker = threading.Thread(target=round_that_notices)
    worker.start()
    manager.abort_and_pause(log.topic_partition)
    worker.join(5)
    assert aborted.is_set()
    assert manager.state_of(log.topic_partition).paused == 1  # type: ignore[union-attr]
    assert logs.checkpoint().read() == {}


def test_checkpoint_updates_drop_partitions_that_are_gone(logs: Logs) -> None:
    """Every update re-reads the file and keeps only live partitions."""
    a, b = logs.add(0, 2), logs.add(1, 2)
    manager = manager_for(logs)
    manager.update_checkpoint(logs.directory, a.topic_partition, 3)
    manager.update_checkpoint(logs.directory, b.topic_partition, 4)
    assert logs.checkpoint().read() == {a.topic_partition: 3, b.topic_partition: 4}
    del logs.logs[b.topic_partition]
    manager.update_checkpoint(logs.directory, a.topic_partition, 5)
    assert logs.checkpoint().read() == {a.topic_partition: 5}
    manager.update_checkpoint(logs.directory, a.topic_partition, None)
    assert logs.checkpoint().read() == {}


def test_a_finished_rounds_checkpoint_write_blocks_no_other_worker(
    logs: Logs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker's abort check and selection go on while a round's checkpoint is written (its fsyncs);
    the log stays in progress until the file is written, and an abort arriving then waits for the write."""
    import threading

    a, b = logs.add(0, 3), logs.add(1, 3)
    manager = manager_for(logs)
    candidate = manager.candidate_for(a.topic_partition)
    writing, release = threading.Event(), threading.Event()
    real_write = OffsetCheckpointFile.write

    def slow_write(
        self: OffsetCheckpointFile,
        entries: dict[TopicPartition, int],
        *,
        carry_over: Collection[TopicPartition] = (),
    ) -> None:
        writing.set()
        assert release.wait(10)
        real_write(self, entries, carry_over=carry_over)

    monkeypatch.setattr(OffsetCheckpointFile, "write", slow_write)
    done = threading.Thread(target=manager.done_cleaning, args=(candidate.log, 4))
    done.start()
    assert writing.wait(10)
    assert not manager.is_aborted(b.topic_partition)
    other = manager.grab_filthiest_compacted_log()  # would wait on _cond if the write held it
    assert other is not None and other.log is b
    assert manager.state_of(a.topic_partition) is not None  # still in progress: nobody else takes it
    aborter = threading.Thread(target=manager.abort_and_pause, args=(a.topic_partition,))
    aborter.start()
    aborter.join(0.2)
    assert aborter.is_alive()  # waits for the round's end, which is the checkpoint write
    release.set()
    done.join(10)
    aborter.join(10)
    assert logs.checkpoint().read() == {a.topic_partition: 4}
    assert manager.state_of(a.topic_partition).paused == 1  # type: ignore[union-attr]


def test_an_error_choosing_one_log_marks_it_uncleanable_and_the_others_are_still_chosen(
    logs: Logs, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's ``grabFilthiestCompactedLog`` wraps a log's error as ``LogCleaningException``: that log alone
    is marked uncleanable, with the reason, and the selection goes on."""
    broken, fine = logs.add(0, 4), logs.add(1, 4)
    # loaded again from disk with max.compaction.lag.ms set: the selection reads its first segment's header
    config = LogConfig(segment_bytes=160, cleanup_policy=COMPACT, max_compaction_lag_ms=1)
    reloaded = load_partition_log(broken.directory, config, clock=clock).log
    logs.logs[broken.topic_partition] = reloaded
    first = reloaded.segments[0].log_path
    first.unlink()
    manager = manager_for(logs)
    chosen = manager.grab_filthiest_compacted_log()
    assert chosen is not None and chosen.log is fine
    (entry,) = manager.uncleanable_entries()
    assert entry.topic_partition == broken.topic_partition and entry.attempts == 1
    assert entry.reason.startswith("FileNotFoundError: ") and str(first) in entry.reason
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "Error choosing whether to clean t-0" in errors[0].getMessage()
    assert manager.grab_filthiest_compacted_log() is None, "skipped until its retry"

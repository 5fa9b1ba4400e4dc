"""``CleanerWorker`` (Kafka ``CleanerThread``) and the round it runs (``round.engine_round`` on the in-process
engine), called step by step on real logs: a finished round is checkpointed, reported and audited; a round
that fails marks its partition uncleanable with the error and the worker goes on (Kafka
``tryCleanFilthiestLog``); a round the stop aborts leaves no mark; every round leaves ``in progress``;
retention runs on the compacted logs, one failing log not stopping the others."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from cleaner.engine import InProcessEngine
from cleaner.pool.manager import CleanerManager
from cleaner.pool.round import engine_round
from cleaner.pool.worker import CleanerWorker, RoundOutcome
from service.base.audit import AUDIT_LOGGER_NAME
from service.base.clock import ManualClock
from service.base.errors import CorruptDataError
from service.core.tasks import DeferredTasks
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.log_files import CLEANER_OFFSET_CHECKPOINT
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.cleaner.helpers import flip_byte

COMPACTED = LogConfig(segment_bytes=160, cleanup_policy=frozenset({"compact"}))


class Pool:
    """Compacted logs in one log dir, their CleanerManager, and a worker on the in-process engine."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.clock = ManualClock()
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.manager = CleanerManager(lambda: dict(self.logs), self.clock)
        self.tasks = DeferredTasks()
        self.outcomes: list[RoundOutcome] = []
        self.retained: list[TopicPartition] = []
        self.stop = threading.Event()
        clean = engine_round(InProcessEngine(self.clock), throttle=lambda _n: None, scheduler=self.tasks)
        self.worker = CleanerWorker(
            0,
            self.manager,
            clean,
            self.retain,
            backoff_ms=15_000,
            stop=self.stop,
            on_outcome=self.outcomes.append,
        )

    def add(self, partition: int, segments: int = 3) -> PartitionLog:
        path = self.directory / f"t-{partition}"
        path.mkdir()
        log = load_partition_log(path, COMPACTED, clock=self.clock).log
        for i in range(segments * 2 + 1):
            log.append_records([Record(0, self.clock.now_ms(), b"k%d" % (i % 2), b"v")])
        self.logs[log.topic_partition] = log
        return log

    def retain(self, log: PartitionLog) -> None:
        self.retained.append(log.topic_partition)

    def checkpoints(self) -> dict[TopicPartition, int]:
        return OffsetCheckpointFile(self.directory / CLEANER_OFFSET_CHECKPOINT).read()


@pytest.fixture
def pool(tmp_path: Path) -> Pool:
    return Pool(tmp_path)


def test_a_finished_round_is_checkpointed_reported_and_audited(
    pool: Pool, caplog: pytest.LogCaptureFixture
) -> None:
    log = pool.add(0)
    end = log.active_segment.base_offset
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER_NAME):
        assert pool.worker.try_clean_filthiest_log()
    assert pool.checkpoints() == {log.topic_partition: end}
    (outcome,) = pool.outcomes
    assert (outcome.topic, outcome.partition, outcome.first_dirty_offset, outcome.end_offset) == (
        "t",
        0,
        0,
        end,
    )
    assert outcome.engine == "in-process" and outcome.bytes_read > 0
    assert pool.worker.last_outcome is outcome
    assert pool.manager.in_progress == []
    (line,) = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER_NAME]
    assert line.startswith(
        f"kafka-log-cleaner-thread-0: cleaned log t-0 in {pool.directory} (dirty section = [0, {end}])"
    )
    assert pool.tasks.run_all() > 0, "the replaced segments' files are deleted later, by the scheduler"


def test_nothing_eligible_is_no_round(pool: Pool) -> None:
    pool.add(0, segments=0)
    assert not pool.worker.try_clean_filthiest_log()
    assert pool.outcomes == [] and not (pool.directory / CLEANER_OFFSET_CHECKPOINT).exists()


def test_a_failing_round_marks_its_partition_uncleanable_and_the_next_log_is_cleaned(
    pool: Pool, caplog: pytest.LogCaptureFixture
) -> None:
    broken, healthy = pool.add(0, segments=4), pool.add(1, segments=3)
    first = broken.segments[0]
    flip_byte(first.log_path, first.size_bytes - 1)  # its last batch's CRC fails when the round reads it
    with caplog.at_level(logging.ERROR, logger="cleaner.pool.worker"):
        assert pool.worker.try_clean_filthiest_log(), "a log was taken, though its round failed"
    (entry,) = pool.manager.uncleanable_entries()
    assert entry.topic_partition == broken.topic_partition
    assert entry.reason.startswith(f"{CorruptDataError.__name__}: ")
    assert any("marking it uncleanable" in r.getMessage() and r.exc_info for r in caplog.records)
    assert pool.manager.in_progress == [] and pool.outcomes == []
    assert pool.worker.try_clean_filthiest_log(), "the loop goes on with the others"
    assert list(pool.checkpoints()) == [healthy.topic_partition]


def test_a_forced_round_raises_after_the_same_bookkeeping(pool: Pool) -> None:
    log = pool.add(0)
    flip_byte(log.segments[0].log_path, log.segments[0].size_bytes - 1)
    candidate = pool.manager.grab_filthiest_compacted_log()
    assert candidate is not None
    with pytest.raises(CorruptDataError):
        pool.worker.run_round(candidate, reraise=True)
    assert pool.manager.in_progress == [] and len(pool.manager.uncleanable_entries()) == 1


def test_a_round_the_stop_aborts_leaves_no_mark(pool: Pool) -> None:
    log = pool.add(0)
    pool.stop.set()
    assert pool.worker.clean_filthiest_logs() == [None]
    assert pool.worker.stopped_rounds == [log.topic_partition]
    assert pool.manager.uncleanable_entries() == [] and pool.manager.in_progress == []
    assert not (pool.directory / CLEANER_OFFSET_CHECKPOINT).exists()


def test_retention_runs_on_compacted_logs_and_a_failure_stops_no_other(
    pool: Pool, caplog: pytest.LogCaptureFixture
) -> None:
    pool.add(0)
    pool.add(1)
    pool.add(2)

    def retain(log: PartitionLog) -> None:
        if log.topic_partition.partition == 1:
            raise OSError("disk gone")
        pool.retained.append(log.topic_partition)

    pool.worker.retention = retain
    with caplog.at_level(logging.ERROR, logger="cleaner.pool.worker"):
        pool.worker.run_retention()
    assert sorted(tp.partition for tp in pool.retained) == [0, 2]
    assert any("retention of t-1 failed" in r.getMessage() for r in caplog.records)
    assert pool.manager.in_progress == [], "every log is released after retention"


def test_the_loop_cleans_then_backs_off_until_stopped(pool: Pool) -> None:
    """Kafka's ``doWork``: clean, retention, and a backoff when nothing was cleaned; only the stop ends
    it."""
    log = pool.add(0)

    def record_and_stop(outcome: RoundOutcome) -> None:
        pool.outcomes.append(outcome)
        pool.stop.set()

    pool.worker.on_outcome = record_and_stop
    pool.worker.thread.start()
    pool.worker.thread.join(30)
    assert not pool.worker.thread.is_alive() and not pool.worker.is_dead
    assert [o.end_offset for o in pool.outcomes] == [log.active_segment.base_offset]
    assert pool.retained == [log.topic_partition], "retention ran after the round"

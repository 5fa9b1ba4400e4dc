"""The cleaner pool's faults, in a real LogManager over real log dirs with real worker threads, the clock
manual: an unreadable ``cleaner-offset-checkpoint`` costs its dir's checkpoints, never the thread; a
corrupt segment makes its partition uncleanable until its retry backoff, then it is cleaned without a
restart; a thread that dies is restarted after ``log.cleaner.backoff.ms`` and counted."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cleaner.engine import InProcessEngine
from cleaner.pool.log_cleaner import LogCleaner
from cleaner.pool.manager import Candidate
from cleaner.pool.round import engine_round
from cleaner.pool.worker import RoundOutcome
from service.base.audit import AUDIT_LOGGER_NAME
from service.base.clock import ManualClock
from service.base.errors import CorruptDataError
from service.config.broker_config import BrokerConfig
from service.config.topic_store import TopicConfigStore
from service.core.tasks import DeferredTasks
from service.shell.node import build_compacted_log_manager, build_log_cleaner
from service.storage.checkpoints import OffsetCheckpointFile, decode_checkpoint
from service.storage.log import PartitionLog
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.cleaner.helpers import flip_byte, wait_for

BACKOFF_MS = 20


class Pool:
    """A LogManager over ``dirs`` log dirs (compacted), the manual clock, and the daemon's cleaner pool."""

    def __init__(self, root: Path, clock: ManualClock, *, dirs: int = 1, **overrides: str) -> None:
        self.dirs = [root / f"logs-{i}" for i in range(dirs)]
        props = {
            "log.dirs": ",".join(str(d) for d in self.dirs),
            "log.cleanup.policy": "compact",
            "log.segment.bytes": "1024",
            "log.cleaner.backoff.ms": str(BACKOFF_MS),
            "log.cleaner.engine": "in-process",
            **overrides,
        }
        self.broker, _ = BrokerConfig.from_properties(props)
        self.clock = clock
        self.tasks = DeferredTasks()
        self.manager, self.cleaning = build_compacted_log_manager(
            self.broker, TopicConfigStore(self.dirs), clock=clock, scheduler=self.tasks
        )
        self.manager.startup()
        self.engine = InProcessEngine(clock)

    def cleaner(self) -> LogCleaner:
        return build_log_cleaner(self.broker, self.manager, self.cleaning, self.engine, scheduler=self.tasks)

    def checkpoints(self, log_dir: Path) -> dict[TopicPartition, int]:
        """The dir's cleaner checkpoint; empty while it is unreadable."""
        try:
            return OffsetCheckpointFile(log_dir / "cleaner-offset-checkpoint").read()
        except CorruptDataError:
            return {}

    def close(self) -> None:
        self.tasks.run_all()
        self.manager.shutdown()


@pytest.fixture
def make_pool(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., Pool]]:
    pools: list[Pool] = []

    def make(*, dirs: int = 1, **overrides: str) -> Pool:
        pools.append(Pool(tmp_path, clock, dirs=dirs, **overrides))
        return pools[-1]

    yield make
    for pool in pools:
        pool.close()


def write_keys(log: PartitionLog, *, keys: int = 30, rounds: int = 4) -> None:
    for r in range(rounds):
        for start in range(0, keys, 10):
            log.append_records([Record(0, -1, b"k%d" % k, b"v%d" % r) for k in range(start, start + 10)])


def listed(cleaner: LogCleaner, part: str = "uncleanable") -> list[dict[str, object]]:
    """A list of ``GET /v1/cleaner``'s document (``status()``)."""
    entries = cleaner.status()[part]
    assert isinstance(entries, list) and all(isinstance(e, dict) for e in entries)
    return entries


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER_NAME]


def test_a_corrupt_checkpoint_costs_its_dirs_checkpoints_never_the_thread(
    make_pool: Callable[..., Pool], caplog: pytest.LogCaptureFixture
) -> None:
    pool = make_pool(dirs=2)
    logs = pool.manager.create_topic("t", 2)
    assert {log.directory.parent for log in logs} == set(pool.dirs), "one partition in each dir"
    for log in logs:
        write_keys(log)
    bad_dir = pool.dirs[0]
    bad_file = bad_dir / "cleaner-offset-checkpoint"
    bad_file.write_bytes(b"0\n1\na 0 not-a-number\n")
    cleaner = pool.cleaner()
    cleaner.start()
    try:
        wait_for(lambda: all(log.topic_partition in pool.checkpoints(log.directory.parent) for log in logs))
    finally:
        cleaner.shutdown()
    assert cleaner.figures().dead_thread_count == 0 and cleaner.thread_restarts == 0
    assert cleaner.manager.uncleanable() == {}, "a file's fault is no partition's"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, "one ERROR for the file, not one per selection"
    assert str(bad_file) in errors[0].getMessage() and "line 3" in errors[0].getMessage()
    assert "'a 0 not-a-number'" in errors[0].getMessage()
    for log in logs:  # the bad dir's log was cleaned from its log start, and its file written whole
        entries = decode_checkpoint(
            (log.directory.parent / "cleaner-offset-checkpoint").read_bytes(), path="written whole"
        )
        assert entries == {log.topic_partition: log.active_segment.base_offset}


def test_a_corrupt_segment_is_uncleanable_then_repaired_and_cleaned_after_its_retry_backoff(
    make_pool: Callable[..., Pool], clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER_NAME)
    pool = make_pool()
    (log,) = pool.manager.create_topic("t", 1)
    write_keys(log)
    segment = log.segments[1]
    flip_byte(segment.log_path, 100)
    cleaner = pool.cleaner()
    cleaner.start()
    try:
        wait_for(lambda: bool(cleaner.manager.uncleanable_entries()))
        (entry,) = listed(cleaner)
        assert entry["topic"] == "t" and entry["partition"] == 0 and entry["attempts"] == 1
        assert str(entry["reason"]).startswith("CorruptDataError: ") and "CRC" in str(entry["reason"])
        assert str(segment.log_path) in str(entry["reason"])
        assert entry["since_ms"] == clock.now_ms() and entry["next_retry_ms"] == clock.now_ms() + 600_000
        assert entry["since"] == "2014-05-13T16:53:20Z" and entry["next_retry"] == "2014-05-13T17:03:20Z"
        flip_byte(segment.log_path, 100)  # repaired
        clock.advance(599_999)
        assert cleaner.manager.is_uncleanable(log.topic_partition, log), "not before its retry"
        assert cleaner.figures().uncleanable_past_retry == {}
        clock.advance(1)
        wait_for(lambda: log.topic_partition in pool.checkpoints(pool.dirs[0]))
    finally:
        cleaner.shutdown()
    assert cleaner.manager.uncleanable_entries() == [] and listed(cleaner) == []
    assert cleaner.figures().dead_thread_count == 0
    lines = audit_lines(caplog)
    gave_up = [line for line in lines if "gave up cleaning t-0" in line]
    assert len(gave_up) == 1 and "(attempt 1): CorruptDataError" in gave_up[0]
    assert "next try in 10m 0s" in gave_up[0]
    assert any(line.startswith("retrying cleaning of t-0") and "(attempt 2;" in line for line in lines)
    assert any(line.startswith("kafka-log-cleaner-thread-0: cleaned log t-0") for line in lines)


def test_minus_one_keeps_kafkas_until_restart(make_pool: Callable[..., Pool], clock: ManualClock) -> None:
    pool = make_pool(**{"log.cleaner.uncleanable.retry.backoff.ms": "-1", "log.cleaner.threads": "0"})
    (log,) = pool.manager.create_topic("t", 1)
    write_keys(log)
    flip_byte(log.segments[1].log_path, 100)
    cleaner = pool.cleaner()
    outcome, chosen = cleaner.clean_filthiest()
    assert chosen and outcome is None
    (entry,) = listed(cleaner)
    assert entry["next_retry"] is None and entry["next_retry_ms"] is None
    flip_byte(log.segments[1].log_path, 100)
    clock.advance(100 * 86_400_000)
    assert cleaner.clean_filthiest() == (None, False), "never tried again"
    assert cleaner.figures().uncleanable_past_retry == {}
    cleaner.retry_uncleanable(log.topic_partition)  # but an operator may ask
    outcome, chosen = cleaner.clean_filthiest()
    assert chosen and outcome is not None and listed(cleaner) == []


def test_an_uncleanable_partition_past_its_retry_is_counted_until_a_selection_takes_it(
    make_pool: Callable[..., Pool], clock: ManualClock
) -> None:
    pool = make_pool(**{"log.cleaner.threads": "0", "log.cleaner.uncleanable.retry.backoff.ms": "1000"})
    (log,) = pool.manager.create_topic("t", 1)
    write_keys(log)
    flip_byte(log.segments[1].log_path, 100)
    cleaner = pool.cleaner()
    cleaner.clean_filthiest()
    clock.advance(1000)
    assert cleaner.figures().uncleanable_past_retry == {pool.dirs[0].resolve(): 1}
    assert cleaner.clean_filthiest() == (None, True), "tried again, failed again"
    figures = cleaner.figures()
    assert figures.uncleanable_past_retry == {} and figures.uncleanable[pool.dirs[0].resolve()][0] == 1
    (entry,) = listed(cleaner)
    assert entry["attempts"] == 2
    assert entry["next_retry_ms"] == clock.now_ms() + 2000, "the backoff doubled"


class WorkerKilled(BaseException):
    """Not an ``Exception``: escapes the worker's per-round handling, as a fatal error would."""


def test_a_dead_thread_is_restarted_after_the_backoff_and_counted(
    make_pool: Callable[..., Pool], clock: ManualClock
) -> None:
    pool = make_pool()
    (log,) = pool.manager.create_topic("t", 1)
    write_keys(log)
    real = engine_round(pool.engine, throttle=lambda _n: None, scheduler=pool.tasks)
    kills = [WorkerKilled()]

    def dies_once(candidate: Candidate, check: Callable[[], None], worker: int) -> RoundOutcome:
        if kills:
            raise kills.pop()
        return real(candidate, check, worker)

    cleaner = LogCleaner(
        pool.cleaning, dies_once, pool.manager.cleanup_compacted_log, threads=1, backoff_ms=BACKOFF_MS
    )
    # the worker thread re-raises: keep pytest's unhandled-thread-exception warning out of the run
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(threading, "excepthook", lambda _args: None)
        cleaner.start()
        try:
            wait_for(lambda: cleaner.dead_thread_count == 1)
            figures = cleaner.figures()
            assert figures.dead_thread_count == 1 and figures.thread_restarts == 0
            assert cleaner.restart_dead_workers() == 0, "not before log.cleaner.backoff.ms on the clock"
            clock.advance(BACKOFF_MS)
            wait_for(lambda: cleaner.thread_restarts == 1)
            wait_for(lambda: log.topic_partition in pool.checkpoints(pool.dirs[0]))
        finally:
            cleaner.shutdown()
    figures = cleaner.figures()
    assert figures.dead_thread_count == 0 and figures.thread_restarts == 1
    assert cleaner.status()["threads"] == [
        {"name": "kafka-log-cleaner-thread-0", "alive": False, "dead": False}
    ]
    assert cleaner.manager.uncleanable() == {}, "a thread's death is not the log's fault"

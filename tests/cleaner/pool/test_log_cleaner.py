"""The cleaner pool in a real LogManager: workers pick and clean compacted logs on their own, checkpoints,
forced rounds, uncleanable partitions, aborts by partition deletion, the CleanerView (dead threads and the
other faults: ``test_log_cleaner_faults.py``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cleaner.pool.log_cleaner import LogCleaner
from cleaner.pool.manager import Candidate
from cleaner.pool.worker import RoundOutcome
from service.base.errors import ConflictError, NotFoundError
from service.storage.log import PartitionLog
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.cleaner.helpers import Env, write_keys


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    environment = Env(tmp_path / "logs")
    yield environment
    environment.close()


def latest_by_key(log: PartitionLog) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for record in log.read(0, max_records=1_000_000):
        assert record.key is not None
        out[record.key] = record.value
    return out


def keys_below(log: PartitionLog, end: int) -> list[bytes]:
    return [r.key or b"" for r in log.read(0, max_records=1_000_000) if r.offset < end]


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_workers_clean_every_dirty_compacted_log_and_checkpoint(env: Env) -> None:
    logs = env.topic("orders", 2) + env.topic("events", 1)
    expected = []
    for log in logs:
        write_keys(log, range(50), rounds=4)
        expected.append(latest_by_key(log))
    cleaner = env.cleaner(threads=2)
    cleaner.start()
    try:
        wait_for(lambda: all(log.topic_partition in env.checkpoints() for log in logs))
    finally:
        cleaner.shutdown()
    for log, latest in zip(logs, expected, strict=True):
        end = env.checkpoints()[log.topic_partition]
        assert end == log.active_segment.base_offset, "cleaned up to the first uncleanable offset"
        below = keys_below(log, end)
        assert len(below) == len(set(below)), "one record per key below the checkpoint"
        assert latest_by_key(log) == latest, "every key keeps its latest value"
    figures = cleaner.figures()
    assert figures.threads == 2 and figures.dead_thread_count == 0
    assert figures.bytes_read_total > figures.bytes_written_total > 0
    assert 0 < figures.cleaner_recopy_percent < 100
    assert cleaner.status()["last_runs"], "the API sees the last runs"


def test_a_worker_goes_on_cleaning_while_records_arrive(tmp_path: Path) -> None:
    # A round may start mid-write; with Kafka's 0.5 the small rest could stay at a ratio of exactly 0.5.
    env = Env(tmp_path / "logs", **{"log.cleaner.min.cleanable.ratio": "0.01"})
    (log,) = env.topic("live")
    cleaner = env.cleaner()
    cleaner.start()
    try:
        checkpoints = []
        for round_no in range(4):
            write_keys(log, range(40), rounds=3, tag=f"r{round_no}-")
            upper = log.active_segment.base_offset
            wait_for(lambda upper=upper: env.checkpoints().get(log.topic_partition, -1) >= upper)  # type: ignore[misc]
            checkpoints.append(env.checkpoints()[log.topic_partition])
            below = keys_below(log, checkpoints[-1])
            assert len(below) == len(set(below))
    finally:
        cleaner.shutdown()
    try:
        latest = latest_by_key(log)  # before the close: a closed log refuses reads
    finally:
        env.close()
    assert checkpoints == sorted(checkpoints) and len(set(checkpoints)) == 4, "the checkpoint moves on"
    assert latest == {b"k%d" % k: f"r3-2-{k}".encode() for k in range(40)}


def test_a_clean_log_is_not_picked_and_the_worker_backs_off(env: Env) -> None:
    (log,) = env.topic("quiet")
    log.append_records([Record(0, -1, b"only", b"once")])
    cleaner = env.cleaner()
    cleaner.start()
    try:
        wait_for(lambda: env.manager.cleaning is not None and cleaner.manager.last_selection_ms is not None)
        time.sleep(0.1)
    finally:
        cleaner.shutdown()
    assert env.checkpoints() == {}, "nothing eligible: nothing cleaned, no checkpoint"
    assert cleaner.figures().time_since_last_run_ms >= 0


def test_a_failing_partition_is_marked_uncleanable_and_the_worker_goes_on(env: Env) -> None:
    bad, good = env.topic("t", 2)
    for log in (bad, good):
        write_keys(log, range(30), rounds=4)
    # Corrupt a batch in the middle of an inactive segment of ``bad``: its CRC check fails the round.
    segment = bad.segments[1]
    with open(segment.log_path, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    cleaner = env.cleaner()
    cleaner.start()
    try:
        wait_for(lambda: good.topic_partition in env.checkpoints() and bool(cleaner.manager.uncleanable()))
    finally:
        cleaner.shutdown()
    assert bad.topic_partition not in env.checkpoints()
    figures = cleaner.figures()
    count, size = figures.uncleanable[env.log_dir]
    assert count == 1 and size > 0
    assert figures.dead_thread_count == 0 and not cleaner.workers[0].is_dead
    entries = cleaner.status()["uncleanable"]
    assert isinstance(entries, list)
    (entry,) = entries
    assert isinstance(entry, dict)
    assert entry.items() >= {"log_dir": str(env.log_dir), "topic": "t", "partition": 0, "bytes": size}.items()
    assert entry["attempts"] == 1 and "CRC mismatch" in entry["reason"]


def test_forced_round_cleans_whatever_the_dirty_ratio(env: Env) -> None:
    (log,) = env.topic("forced")
    write_keys(log, range(30), rounds=3)
    env.store.update("forced", {"min.cleanable.dirty.ratio": "0.99"})
    env.manager.apply_topic_config("forced")
    cleaner = env.cleaner()
    doc = cleaner.clean_partition(TopicPartition("forced", 0))
    assert doc["topic"] == "forced" and doc["partition"] == 0 and doc["first_dirty_offset"] == 0
    assert doc["end_offset"] == log.active_segment.base_offset == env.checkpoints()[log.topic_partition]
    stats = doc["stats"]
    assert isinstance(stats, dict) and stats["records_read"] > stats["records_retained"] > 0


def test_forced_round_errors_name_the_problem(env: Env) -> None:
    env.topic("compacted")
    env.store.update("plain", {"cleanup.policy": "delete"})
    env.topic("plain")
    cleaner = env.cleaner()
    with pytest.raises(NotFoundError, match="nope-0"):
        cleaner.clean_partition(TopicPartition("nope", 0))
    with pytest.raises(ConflictError, match="not compacted"):
        cleaner.clean_partition(TopicPartition("plain", 0))
    cleaner.manager.abort_and_pause(TopicPartition("compacted", 0))
    with pytest.raises(ConflictError, match="paused"):
        cleaner.clean_partition(TopicPartition("compacted", 0))


def test_deleting_a_topic_aborts_its_running_cleaning(env: Env) -> None:
    (log,) = env.topic("doomed")
    write_keys(log, range(30), rounds=3)
    started, outcomes = threading.Event(), []

    def slow(candidate: Candidate, check_aborted: Callable[[], None], _worker: int) -> RoundOutcome:
        started.set()
        while True:  # a long round that checks for an abort between units of work
            check_aborted()
            time.sleep(0.01)

    cleaner = LogCleaner(env.cleaning, slow, env.manager.cleanup_compacted_log, threads=1, backoff_ms=20)
    cleaner.start()
    try:
        assert started.wait(10)
        env.manager.delete_topic("doomed")  # abort_and_pause waits until the round has stopped
        outcomes.append(cleaner.manager.state_of(TopicPartition("doomed", 0)))
    finally:
        cleaner.shutdown()
    assert outcomes == [None], "aborted, then resumed and forgotten with the partition"
    assert TopicPartition("doomed", 0) not in env.manager.logs
    assert not cleaner.workers[0].is_dead


def test_forced_worker_is_not_named_like_a_numbered_cleaner_thread(env: Env) -> None:
    cleaner = env.cleaner()
    assert cleaner._forced.name == "logcleaner-forced-clean"
    assert [w.name for w in cleaner.workers][:1] in ([], ["kafka-log-cleaner-thread-0"])

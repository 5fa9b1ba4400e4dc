"""``summary``: the parts of a live LogManager with the daemon's memo (figures kept while the log's
snapshot, config, checkpoint and holds are unchanged and younger than ``MEMO_MAX_AGE_MS``), the unloaded
``-delete`` and ``-future`` dirs, and the document adding them up (held reasons largest first, the five
largest partitions named per reason, errors listed, ``generated_at`` in UTC)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.core.held_bytes import PartitionBytes
from service.core.log_manager import LogManager
from service.core.summary import (
    MEMO_MAX_AGE_MS,
    PartitionMemo,
    summary_document,
    summary_parts,
    unloaded_dir_parts,
)
from service.core.tasks import ManualTaskScheduler
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log_config import LogConfig
from service.storage.log_files import CLEANER_OFFSET_CHECKPOINT
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.retention_helpers import START_MS

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
HOUR_MS = 3_600_000
COMPACTED = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=350)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def manager(tmp_path: Path, clock: ManualClock) -> Iterator[LogManager]:
    """``orders`` (compacted, 2 partitions), each three segments of keyed batches."""
    manager = LogManager(
        [tmp_path / "logs"], lambda _t: COMPACTED, clock=clock, scheduler=ManualTaskScheduler(clock)
    )
    manager.startup()
    for log in manager.create_topic("orders", 2):
        for i in range(12):
            log.append_records([Record(0, START_MS, b"%d" % (i % 3), b"v")])
    yield manager
    manager.release_locks()


def parts_by_tp(parts: list[PartitionBytes]) -> dict[TopicPartition, PartitionBytes]:
    return {
        TopicPartition(p.topic, p.partition): p
        for p in parts
        if p.topic is not None and p.partition is not None
    }


def test_an_unchanged_log_keeps_its_figures_for_a_minute(manager: LogManager, clock: ManualClock) -> None:
    memo: dict[TopicPartition, PartitionMemo] = {}
    first = parts_by_tp(summary_parts(manager, cleaner_enabled=True, memo=memo))
    clock.advance(MEMO_MAX_AGE_MS - 1)
    again = parts_by_tp(summary_parts(manager, cleaner_enabled=True, memo=memo))
    assert again[T0] is first[T0] and again[T1] is first[T1]
    clock.advance(1)
    later = parts_by_tp(summary_parts(manager, cleaner_enabled=True, memo=memo))
    assert later[T0] is not first[T0], "time alone moves verdicts: figured again"


def test_a_change_to_a_log_or_its_inputs_figures_it_again(manager: LogManager) -> None:
    memo: dict[TopicPartition, PartitionMemo] = {}
    first = parts_by_tp(summary_parts(manager, cleaner_enabled=True, memo=memo))
    log = manager.get_log(T0)
    assert log is not None
    log.append_records([Record(0, START_MS, b"k", b"v")])
    after_append = parts_by_tp(summary_parts(manager, cleaner_enabled=True, memo=memo))
    assert after_append[T0] is not first[T0] and after_append[T1] is first[T1], "only the log that changed"
    marked = parts_by_tp(summary_parts(manager, cleaner_enabled=True, uncleanable={T1}, memo=memo))
    assert marked[T1] is not first[T1] and marked[T1].cleanable is None, "an uncleanable mark is an input"
    OffsetCheckpointFile(log.directory.parent / CLEANER_OFFSET_CHECKPOINT).write({T0: 5})
    checkpointed = parts_by_tp(summary_parts(manager, cleaner_enabled=True, uncleanable={T1}, memo=memo))
    assert checkpointed[T0] is not after_append[T0] and checkpointed[T1] is marked[T1]
    cleanable = checkpointed[T0].cleanable
    assert cleanable is not None and cleanable.first_dirty_offset == 5


def test_the_memo_forgets_deleted_logs(manager: LogManager) -> None:
    memo: dict[TopicPartition, PartitionMemo] = {}
    summary_parts(manager, cleaner_enabled=True, memo=memo)
    assert set(memo) == {T0, T1}
    manager.delete_topic("orders")
    summary_parts(manager, cleaner_enabled=True, memo=memo)
    assert memo == {}


def test_a_log_that_cannot_be_figured_counts_unreadable(tmp_path: Path, clock: ManualClock) -> None:
    """An error reading one log's figures is that log's, under ``unreadable`` with its error and its dir's
    segment bytes: the summary goes on with the others."""
    timed = LogConfig(segment_bytes=350, retention_ms=HOUR_MS)  # time retention reads each segment's age
    manager = LogManager(
        [tmp_path / "logs"], lambda _t: timed, clock=clock, scheduler=ManualTaskScheduler(clock)
    )
    manager.startup()
    try:
        for log in manager.create_topic("orders", 2):
            for _ in range(12):
                log.append_records([Record(0, -1, None, b"v")])  # no timestamps: ages by the files
        broken = manager.get_log(T0)
        assert broken is not None
        for path in broken.directory.glob("00000000000000000000.*"):
            path.unlink()  # its first segment's files gone under it
        parts = parts_by_tp(summary_parts(manager, cleaner_enabled=True))
        error = parts[T0].error
        assert error is not None and "No such file" in error
        assert set(parts[T0].by_reason) == {"unreadable"}
        assert parts[T0].path == str(broken.directory)
        assert parts[T1].error is None and "unreadable" not in parts[T1].by_reason
    finally:
        manager.release_locks()


def test_unloaded_dirs_count_pending_delete_and_future_replicas(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    deleted = log_dir / "orders-0.0123456789abcdef0123456789abcdef-delete"
    future = log_dir / "orders-1.fedcba9876543210fedcba9876543210-future"
    for directory, size in ((deleted, 100), (future, 250)):
        directory.mkdir(parents=True)
        (directory / "00000000000000000000.log").write_bytes(b"x" * size)
        (directory / "00000000000000000000.index").write_bytes(b"x" * 999)  # only .log bytes count
    (log_dir / "orders-2").mkdir()  # a live partition dir: the LogManager's
    (log_dir / "not a partition").mkdir()
    parts = unloaded_dir_parts([log_dir, tmp_path / "offline"], skip=[tmp_path / "offline"])
    assert [(p.topic, p.partition, p.by_reason) for p in parts] == [
        ("orders", 0, {"pending-delete": 100}),
        ("orders", 1, {"future-replica": 250}),
    ]


def test_a_log_dir_that_cannot_be_listed_is_unreadable(tmp_path: Path) -> None:
    (part,) = unloaded_dir_parts([tmp_path / "missing"])
    assert part.by_reason == {"unreadable": 0} and part.error is not None and part.topic is None


def test_the_document_adds_up_and_names_the_five_largest(tmp_path: Path) -> None:
    parts = []
    for i in range(7):
        part = PartitionBytes("t", i)
        part.add("within-retention", 100 * (i + 1))
        parts.append(part)
    broken = PartitionBytes(None, None, error="Permission denied", path="/data/a")
    broken.add("unreadable", 0)
    parts.append(broken)
    doc = summary_document(parts, generated_at_ms=1_764_297_127_123)
    assert doc["total_bytes"] == sum(100 * (i + 1) for i in range(7))
    assert doc["partitions"] == 7, "a log dir is not a partition"
    assert doc["generated_at"] == "2025-11-28T02:32:07.123Z"
    held = doc["held"]
    assert isinstance(held, list)
    assert [h["reason"] for h in held] == ["within-retention", "unreadable"], "largest first"
    assert [t["partition"] for t in held[0]["top"]] == [6, 5, 4, 3, 2]
    assert held[1]["errors"] == [{"path": "/data/a", "error": "Permission denied"}]
    assert "errors" not in held[0]

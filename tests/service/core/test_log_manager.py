"""LogManager (Kafka ``LogManager`` and its checkpoint files): start-up over log dirs, topics, asynchronous
partition deletion, checkpoints after retention, shutdown and the dir lock, offline dirs, live topic configs.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from service.base.clock import ManualClock
from service.base.errors import ConflictError, InvalidInputError, NotFoundError
from service.core.log_manager import LogManager, LogManagerSettings
from service.core.retention import RetentionReason
from service.core.tasks import ManualTaskScheduler
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.load_progress import LoadProgress
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.log_files import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.retention_helpers import START_MS, append_plain, log_config

MakeManager = Callable[..., LogManager]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def scheduler(clock: ManualClock) -> ManualTaskScheduler:
    return ManualTaskScheduler(clock)


@pytest.fixture
def topic_configs() -> dict[str, LogConfig]:
    """Per-topic settings (the durable topic overrides); topics not listed get Kafka's defaults."""
    return {}


@pytest.fixture
def make_manager(
    clock: ManualClock, scheduler: ManualTaskScheduler, topic_configs: dict[str, LogConfig]
) -> Iterator[MakeManager]:
    """Build (and by default start) a LogManager; every dir lock is released at the end of the test."""
    managers: list[LogManager] = []

    def _make(*log_dirs: Path, start: bool = True, **settings: Any) -> LogManager:
        manager = LogManager(
            list(log_dirs),
            lambda topic: topic_configs.get(topic, LogConfig()),
            clock=clock,
            scheduler=scheduler,
            settings=LogManagerSettings(**settings),
        )
        managers.append(manager)
        if start:
            manager.startup()
        return manager

    yield _make
    for manager in managers:
        manager.release_locks()


def append(log: PartitionLog, count: int, timestamp: int = START_MS) -> None:
    for i in range(count):
        log.append_records([Record(0, timestamp, None, b"v%d" % i)])


def checkpoint(log_dir: Path, name: str) -> dict[TopicPartition, int]:
    return OffsetCheckpointFile(log_dir / name).read()


def placement(manager: LogManager) -> dict[str, list[str]]:
    """Log dir name → the partitions in it."""
    out: dict[str, list[str]] = {path.name: [] for path in manager.log_dirs}
    for tp, log in sorted(manager.logs.items()):
        out[log.directory.parent.name].append(str(tp))
    return out


# -- start-up and shutdown ----------------------------------------------------------------------------


def test_startup_loads_every_partition_of_every_dir(tmp_path: Path, make_manager: MakeManager) -> None:
    dirs = tmp_path / "a", tmp_path / "b"
    first = make_manager(*dirs)
    first.create_topic("orders", 3)
    first.create_topic("users", 2)
    for i, log in enumerate(first.logs.values()):
        append(log, i + 1)
    expected = {tp: log.log_end_offset for tp, log in first.logs.items()}
    first.shutdown()
    for path in dirs:
        assert (path / CLEAN_SHUTDOWN_FILE).exists()
    (dirs[0] / "not a partition").mkdir()

    second = make_manager(*dirs)

    assert second.is_loaded
    assert second.offline_dirs == {}
    assert {tp: log.log_end_offset for tp, log in second.logs.items()} == expected
    assert second.topics() == {"orders": [0, 1, 2], "users": [0, 1]}
    for path in dirs:
        assert not (path / CLEAN_SHUTDOWN_FILE).exists(), "the marker is consumed at start-up"
    log = second.get_log(TopicPartition("orders", 0))
    assert log.read(0)[0].value == b"v0"
    with pytest.raises(NotFoundError):
        second.get_log(TopicPartition("orders", 3))


def test_shutdown_writes_both_checkpoints_and_the_marker(tmp_path: Path, make_manager: MakeManager) -> None:
    manager = make_manager(tmp_path / "logs")
    [log] = manager.create_topic("t", 1)
    append(log, 10)
    log.roll()
    append(log, 5)
    log.increment_log_start_offset(3)

    manager.shutdown()

    tp = TopicPartition("t", 0)
    assert checkpoint(tmp_path / "logs", RECOVERY_POINT_CHECKPOINT) == {tp: 15}
    assert checkpoint(tmp_path / "logs", LOG_START_OFFSET_CHECKPOINT) == {tp: 3}
    assert (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()
    reloaded = make_manager(tmp_path / "logs").get_log(tp)
    assert (reloaded.log_start_offset, reloaded.log_end_offset) == (3, 15)


class LoadingThreads(LoadProgress):
    """``LoadProgress`` that also notes the thread each log finished loading on."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def loaded_one(self) -> None:
        self.names.add(threading.current_thread().name)
        super().loaded_one()


def test_many_recovery_threads_close_every_log_and_write_each_checkpoint_once(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    """``num.recovery.threads.per.data.dir`` > 1: the logs close on a pool; the checkpoints list them all;
    the next start loads them on its own thread (threads would contend for the GIL: ``log_dir``)."""
    manager = make_manager(tmp_path / "logs", recovery_threads_per_dir=4)
    logs = manager.create_topic("t", 6)
    for n, log in enumerate(logs):
        append(log, n + 1)
    manager.shutdown()
    assert all(log.is_closed for log in logs)
    expected = {TopicPartition("t", n): n + 1 for n in range(6)}
    assert checkpoint(tmp_path / "logs", RECOVERY_POINT_CHECKPOINT) == expected
    assert (tmp_path / "logs" / CLEAN_SHUTDOWN_FILE).exists()
    reloaded = make_manager(tmp_path / "logs", start=False, recovery_threads_per_dir=4)
    reloaded.load_progress = loading = LoadingThreads()
    reloaded.startup()
    assert {tp: log.log_end_offset for tp, log in reloaded.logs.items()} == expected
    assert loading.names == {threading.current_thread().name}
    assert loading.counts == (6, 6)


def test_a_locked_log_dir_refuses_a_second_manager(tmp_path: Path, make_manager: MakeManager) -> None:
    shared, other = tmp_path / "shared", tmp_path / "other"
    holder = make_manager(shared)

    with pytest.raises(ConflictError):
        make_manager(other, shared)

    make_manager(other)  # the failed start-up released the dir it had locked
    holder.shutdown()
    make_manager(shared)


def test_a_dir_that_cannot_be_opened_goes_offline_alone(tmp_path: Path, make_manager: MakeManager) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    broken, good = tmp_path / "a-file" / "logs", tmp_path / "good"
    seed = make_manager(good)
    append(seed.create_topic("t", 1)[0], 4)
    seed.shutdown()

    manager = make_manager(broken, good)

    assert list(manager.offline_dirs) == [broken.resolve()]
    assert [s.path for s in manager.online_dirs()] == [good.resolve()]
    assert manager.get_log(TopicPartition("t", 0)).log_end_offset == 4
    [created] = manager.create_topic("fresh", 1)
    assert created.directory.parent == good.resolve()
    manager.checkpoint_recovery_points()
    manager.checkpoint_log_start_offsets()
    assert list(manager.offline_dirs) == [broken.resolve()]


def test_partition_dirs_awaiting_deletion_are_queued_at_startup(
    tmp_path: Path, make_manager: MakeManager, clock: ManualClock
) -> None:
    manager = make_manager(tmp_path / "logs")
    manager.create_topic("gone", 1)
    manager.delete_topic("gone")
    manager.shutdown()
    [renamed] = [p for p in (tmp_path / "logs").iterdir() if p.name.endswith("-delete")]

    restarted = make_manager(tmp_path / "logs")

    assert restarted.logs == {}
    assert restarted.pending_partition_deletions == [renamed]
    clock.advance(60_000)
    restarted.delete_logs()
    assert not renamed.exists()


# -- topics -------------------------------------------------------------------------------------------


def test_new_partitions_go_to_the_dir_with_fewest(tmp_path: Path, make_manager: MakeManager) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    seed = make_manager(a)
    seed.create_topic("old", 2)
    seed.shutdown()
    manager = make_manager(a, b)

    manager.create_topic("new", 2)
    assert placement(manager) == {"a": ["old-0", "old-1"], "b": ["new-0", "new-1"]}

    manager.create_topic("more", 3)
    counts = {name: len(tps) for name, tps in placement(manager).items()}
    assert sorted(counts.values()) == [3, 4]
    manager.create_topic("last", 1)
    assert {name: len(tps) for name, tps in placement(manager).items()} == {"a": 4, "b": 4}
    for tp, log in manager.logs.items():
        assert log.directory.name == str(tp)
        assert log.directory.is_dir()


@pytest.mark.parametrize("name", ["..", ".", "", "a/b", "x" * 250, "sp ace", "ü"])
def test_invalid_topic_names_are_refused(tmp_path: Path, make_manager: MakeManager, name: str) -> None:
    manager = make_manager(tmp_path / "logs")
    with pytest.raises(InvalidInputError, match="invalid"):
        manager.create_topic(name, 1)
    assert manager.logs == {}
    assert sorted(p.name for p in (tmp_path / "logs").iterdir() if p.is_dir()) == []


def test_topic_name_limits(tmp_path: Path, make_manager: MakeManager) -> None:
    manager = make_manager(tmp_path / "logs")
    [log] = manager.create_topic("x" * 249, 1)
    assert log.directory.name == "x" * 249 + "-0"
    assert manager.create_topic("a.b_c-D9", 1)
    with pytest.raises(InvalidInputError):
        manager.create_topic("zero", 0)


def test_creating_an_existing_topic_conflicts(tmp_path: Path, make_manager: MakeManager) -> None:
    manager = make_manager(tmp_path / "logs")
    manager.create_topic("t", 2)
    with pytest.raises(ConflictError):
        manager.create_topic("t", 1)
    with pytest.raises(ConflictError):
        manager.create_topic("t", 5)
    assert manager.topics() == {"t": [0, 1]}


def test_delete_topic_renames_and_drops_checkpoint_entries(tmp_path: Path, make_manager: MakeManager) -> None:
    log_dir = tmp_path / "logs"
    manager = make_manager(log_dir)
    doomed = manager.create_topic("doomed", 2)
    [kept] = manager.create_topic("kept", 1)
    for log in [*doomed, kept]:
        append(log, 5)
        log.roll()
        append(log, 5)
        log.increment_log_start_offset(2)
    manager.checkpoint_recovery_points()
    manager.checkpoint_log_start_offsets()
    assert len(checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)) == 3
    assert len(checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)) == 3

    deleted = manager.delete_topic("doomed")

    assert deleted == [TopicPartition("doomed", 0), TopicPartition("doomed", 1)]
    assert manager.topics() == {"kept": [0]}
    with pytest.raises(NotFoundError):
        manager.get_log(TopicPartition("doomed", 0))
    names = sorted(p.name for p in log_dir.iterdir() if p.is_dir())
    assert names[-1] == "kept-0"
    for p, name in enumerate(names[:2]):
        assert re.fullmatch(rf"doomed-{p}\.[0-9a-f]{{32}}-delete", name), name
        assert (log_dir / name / "00000000000000000005.log").exists(), "the files move with the dir"
    only_kept = {TopicPartition("kept", 0)}
    assert set(checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)) == only_kept
    assert set(checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)) == only_kept
    with pytest.raises(NotFoundError):
        manager.delete_topic("doomed")
    manager.create_topic("doomed", 1)  # the name is free again at once


def test_a_deleted_log_writes_nothing_on_its_way_out(tmp_path: Path, make_manager: MakeManager) -> None:
    """No flush, final index entry or producer snapshot for files about to go (Kafka's asyncDelete):
    deleting a 1,000-partition topic must not cost thousands of fsyncs."""
    log_dir = tmp_path / "logs"
    manager = make_manager(log_dir)
    [log] = manager.create_topic("doomed", 1)
    append(log, 5)
    before = {p.name: p.read_bytes() for p in log.directory.iterdir()}

    manager.delete_topic("doomed")

    [renamed] = [p for p in log_dir.iterdir() if p.name.endswith("-delete")]
    assert {p.name: p.read_bytes() for p in renamed.iterdir()} == before


def test_deleted_partition_dirs_go_after_the_broker_delay(
    tmp_path: Path, make_manager: MakeManager, clock: ManualClock, topic_configs: dict[str, LogConfig]
) -> None:
    """The broker's log.segment.delete.delay.ms (60 s) counts, not the topic's file.delete.delay.ms."""
    topic_configs["t"] = log_config(file_delete_delay_ms=0)
    manager = make_manager(tmp_path / "logs", log_segment_delete_delay_ms=60_000)
    append(manager.create_topic("t", 1)[0], 3)
    manager.delete_topic("t")
    [renamed] = manager.pending_partition_deletions
    assert renamed.name.startswith("t-0.")

    clock.advance(10_000)
    assert manager.delete_logs() == 50_000, "runs again when the head is due"
    assert renamed.is_dir()
    clock.advance(49_999)
    assert manager.delete_logs() == 1
    assert renamed.is_dir()
    clock.advance(1)
    assert manager.delete_logs() == 60_000, "an empty queue waits one full delay"
    assert not renamed.exists()
    assert manager.pending_partition_deletions == []


# -- retention and checkpoints ------------------------------------------------------------------------


def test_log_start_offset_checkpoint_after_retention(tmp_path: Path, make_manager: MakeManager) -> None:
    log_dir = tmp_path / "logs"
    manager = make_manager(log_dir)
    [log] = manager.create_topic("t", 1)
    tp = log.topic_partition
    for offset in range(50):
        append(log, 1)
        if offset in (10, 20, 30, 40):
            log.roll()
    assert [s.base_offset for s in log.segments] == [0, 11, 21, 31, 41]
    log.increment_log_start_offset(31)
    manager.checkpoint_log_start_offsets()
    assert checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT) == {tp: 31}
    assert len(log.segments) == 5

    deleted = manager.cleanup_logs()

    assert [(d.base_offset, d.reason) for d in deleted] == [
        (0, RetentionReason.LOG_START_OFFSET),
        (11, RetentionReason.LOG_START_OFFSET),
        (21, RetentionReason.LOG_START_OFFSET),
    ]
    assert ([s.base_offset for s in log.segments], log.log_start_offset) == ([31, 41], 31)
    manager.checkpoint_log_start_offsets()
    assert checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT) == {}, "start offset == first segment base"
    manager.checkpoint_recovery_points()
    assert checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT) == {tp: log.recovery_point}
    assert log.recovery_point >= 31


def test_segment_files_go_after_the_topic_file_delete_delay(
    tmp_path: Path,
    make_manager: MakeManager,
    scheduler: ManualTaskScheduler,
    topic_configs: dict[str, LogConfig],
) -> None:
    topic_configs["t"] = log_config(segment_bytes=360, retention_ms=1000, file_delete_delay_ms=5000)
    manager = make_manager(tmp_path / "logs", log_segment_delete_delay_ms=60_000)
    [log] = manager.create_topic("t", 1)
    append_plain(log, 10, timestamp=START_MS - 2000)

    assert len(manager.cleanup_logs()) == 2
    doomed = sorted(p.name for p in log.directory.iterdir() if p.name.endswith(".deleted"))
    assert "00000000000000000000.log.deleted" in doomed

    scheduler.advance(4999)
    assert all((log.directory / name).exists() for name in doomed)
    scheduler.advance(1)
    assert not any(p.name.endswith(".deleted") for p in log.directory.iterdir())


def test_topic_config_changes_apply_without_restart(
    tmp_path: Path, make_manager: MakeManager, topic_configs: dict[str, LogConfig]
) -> None:
    topic_configs["t"] = topic_configs["other"] = log_config(segment_bytes=360, retention_ms=-1)
    manager = make_manager(tmp_path / "logs")
    logs = [*manager.create_topic("t", 2), *manager.create_topic("other", 1)]
    for log in logs:
        append_plain(log, 10, timestamp=START_MS - 10_000)
    assert manager.cleanup_logs() == []

    topic_configs["t"] = log_config(segment_bytes=360, retention_ms=1000)
    manager.apply_topic_config("t")

    assert [log.config.retention_ms for log in logs] == [1000, 1000, -1]
    deleted = manager.cleanup_logs()
    assert sorted((d.topic, d.partition) for d in deleted) == [("t", 0), ("t", 0), ("t", 1), ("t", 1)]
    assert [len(log.segments) for log in logs] == [1, 1, 2]


def test_retention_task_and_cleaner_split_the_logs(
    tmp_path: Path, make_manager: MakeManager, topic_configs: dict[str, LogConfig]
) -> None:
    """Kafka ``cleanupLogs``: the task takes logs without ``compact``; the cleaner's pass takes the others."""
    for topic, policy in (("d", "delete"), ("c", "compact"), ("cd", "compact,delete")):
        topic_configs[topic] = log_config(policy=policy, segment_bytes=380, retention_ms=1000)
    manager = make_manager(tmp_path / "logs")
    for topic in topic_configs:
        [log] = manager.create_topic(topic, 1)
        for _ in range(10):
            log.append_records([Record(0, START_MS - 5000, b"test", b"test")])

    assert {d.topic for d in manager.cleanup_logs()} == {"d"}
    assert {d.topic for d in manager.cleanup_compacted_logs()} == {"cd"}


def test_deleting_a_topic_with_a_long_name_keeps_the_partition_in_the_dir_name(
    tmp_path: Path, make_manager: MakeManager, clock: ManualClock
) -> None:
    """Kafka shortens the topic, never the ``-<partition>``, so the renamed dir still parses on restart."""
    topic = "x" * 249
    manager = make_manager(tmp_path / "logs")
    manager.create_topic(topic, 12)
    manager.delete_topic(topic)
    renamed = manager.pending_partition_deletions
    assert len({p.name for p in renamed}) == 12
    for path in renamed:
        assert len(path.name) == 255
        assert re.fullmatch(r"x+-[0-9]+\.[0-9a-f]{32}-delete", path.name), path.name
    assert sorted(int(p.name.split(".")[0].rsplit("-", 1)[1]) for p in renamed) == list(range(12))
    manager.shutdown()

    restarted = make_manager(tmp_path / "logs")

    assert sorted(restarted.pending_partition_deletions) == sorted(renamed)
    clock.advance(60_000)
    restarted.delete_logs()
    assert [p.name for p in (tmp_path / "logs").iterdir() if p.is_dir()] == []


def test_every_topic_config_applies_in_one_pass(
    tmp_path: Path, make_manager: MakeManager, topic_configs: dict[str, LogConfig]
) -> None:
    """``apply_topic_configs``: what ``apply_topic_config`` of each topic does, in one pass over the logs."""
    topic_configs["t"] = topic_configs["other"] = log_config(segment_bytes=360, retention_ms=-1)
    manager = make_manager(tmp_path / "logs")
    logs = [*manager.create_topic("t", 2), *manager.create_topic("other", 1)]
    topic_configs["t"] = log_config(segment_bytes=360, retention_ms=1000)
    topic_configs["other"] = log_config(segment_bytes=360, retention_ms=2000)
    manager.apply_topic_configs()
    assert [log.config.retention_ms for log in logs] == [1000, 1000, 2000]
    assert logs[0].config is logs[1].config, "each topic's config resolved once"

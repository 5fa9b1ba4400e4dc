"""LogManager under faults: topic deletion is one ordered step that an I/O error cannot
leave half done, and an I/O error on the write path takes the log dir offline at once, its partitions still
listed (Kafka's log-dir failure handling).

Faults are injected at the file layer (``os.pwrite``, ``os.fsync``, ``Path.rename`` raising the errno a
failing disk gives); everything else is real files.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from service.base.clock import ManualClock
from service.base.errors import ConflictError, LogClosedError, LogDirOfflineError
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.core.managers import MakeManager, manager_factory


@pytest.fixture
def make_manager() -> Iterator[MakeManager]:
    with manager_factory(ManualClock(1_700_000_000_000), lambda _topic: LogConfig()) as make:
        yield make


def _append(log: PartitionLog, prefix: bytes, count: int) -> None:
    log.append_records([Record(0, 1_000, None, prefix + b"%d" % i) for i in range(count)])


def _values(log: PartitionLog) -> list[bytes | None]:
    return [r.value for r in log.read(0, max_records=10_000)]


def _fail_with(code: int) -> Callable[..., Any]:
    def fail(*args: object, **kwargs: object) -> Any:
        raise OSError(code, os.strerror(code))

    return fail


def test_a_deleted_topics_log_refuses_writes_and_the_recreated_topic_is_untouched(
    tmp_path: Path, make_manager: MakeManager
) -> None:
    manager = make_manager(tmp_path / "logs")
    [old] = manager.create_topic("rt", 1)
    _append(old, b"old", 3)

    manager.delete_topic("rt")
    [new] = manager.create_topic("rt", 1)

    with pytest.raises(LogClosedError, match="rt-0 was deleted"):
        _append(old, b"late", 3)  # a produce that looked the log up before the delete
    assert new.directory == old.directory
    assert new.active_segment.log_path.stat().st_size == 0
    assert _values(new) == []


def test_a_failed_rename_leaves_the_topic_whole_and_offline(
    tmp_path: Path, make_manager: MakeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "logs"
    manager = make_manager(log_dir)
    [log] = manager.create_topic("rt", 1)
    _append(log, b"v", 4)

    with monkeypatch.context() as patch:
        patch.setattr(Path, "rename", _fail_with(errno.EIO))
        with pytest.raises(LogDirOfflineError, match=str(log_dir.resolve())):
            manager.delete_topic("rt")

    assert manager.topics() == {"rt": [0]}, "still listed"
    assert list(manager.offline_logs) == [TopicPartition("rt", 0)]
    assert list(manager.offline_dirs) == [log_dir.resolve()]
    assert sorted(p.name for p in log_dir.iterdir() if p.is_dir()) == ["rt-0"], "no half-renamed dir"
    with pytest.raises(LogDirOfflineError):
        manager.get_log(TopicPartition("rt", 0))
    with pytest.raises(ConflictError):
        manager.create_topic("rt", 1)
    manager.shutdown()

    again = make_manager(log_dir)  # the deletion did not happen: the topic and its records are back
    assert again.offline_dirs == {}
    assert _values(again.get_log(TopicPartition("rt", 0))) == [b"v0", b"v1", b"v2", b"v3"]


def test_enospc_on_append_takes_the_dir_offline_at_once(
    tmp_path: Path, make_manager: MakeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    full, healthy = tmp_path / "full", tmp_path / "healthy"
    manager = make_manager(full, healthy)
    logs = manager.create_topic("t", 2)
    on_full = next(log for log in logs if log.directory.parent == full.resolve())
    on_healthy = next(log for log in logs if log.directory.parent == healthy.resolve())
    _append(on_full, b"acked", 5)

    with monkeypatch.context() as patch:
        patch.setattr(os, "pwrite", _fail_with(errno.ENOSPC))
        with pytest.raises(LogDirOfflineError, match=f"log dir {full.resolve()} is offline"):
            _append(on_full, b"refused", 5)

    assert list(manager.offline_dirs) == [full.resolve()]
    assert "No space left on device" in manager.offline_dirs[full.resolve()]
    assert manager.topics() == {"t": [0, 1]}, "partitions on the offline dir stay listed"
    assert set(manager.offline_logs) == {on_full.topic_partition}
    with pytest.raises(LogDirOfflineError):
        manager.get_log(on_full.topic_partition)
    _append(on_healthy, b"ok", 2)  # the other dir goes on
    manager.checkpoint_recovery_points()  # skips the offline dir
    manager.shutdown()

    again = make_manager(full, healthy)
    assert again.offline_dirs == {}
    assert _values(again.get_log(on_full.topic_partition)) == [b"acked%d" % i for i in range(5)]
    assert _values(again.get_log(on_healthy.topic_partition)) == [b"ok0", b"ok1"]


def test_an_io_error_in_the_flusher_takes_the_dir_offline(
    tmp_path: Path, make_manager: MakeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = make_manager(tmp_path / "logs")
    [log] = manager.create_topic("t", 1)
    _append(log, b"v", 2)
    log.last_flush_ms = -(2**63)  # due whatever flush.ms

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", _fail_with(errno.EIO))
        manager.flush_dirty_logs()

    assert list(manager.offline_dirs) == [(tmp_path / "logs").resolve()]
    assert manager.topics() == {"t": [0]}
    with pytest.raises(LogDirOfflineError):
        manager.get_log(TopicPartition("t", 0))


def test_the_flusher_skips_a_log_deleted_meanwhile(tmp_path: Path, make_manager: MakeManager) -> None:
    manager = make_manager(tmp_path / "logs")
    [log] = manager.create_topic("t", 1)
    _append(log, b"v", 2)
    log.close(deleted=True)  # as a delete running in another thread does, before it forgets the log
    log.last_flush_ms = -(2**63)  # due whatever flush.ms

    manager.flush_dirty_logs()

    assert manager.offline_dirs == {}


def test_an_io_error_creating_a_partition_takes_the_dir_offline(
    tmp_path: Path, make_manager: MakeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "logs"
    manager = make_manager(log_dir)

    with monkeypatch.context() as patch:
        patch.setattr(Path, "mkdir", _fail_with(errno.EIO))
        with pytest.raises(LogDirOfflineError, match="cannot create t-0"):
            manager.create_topic("t", 1)

    assert list(manager.offline_dirs) == [log_dir.resolve()]
    with pytest.raises(LogDirOfflineError, match="no log dir is online"):
        manager.create_topic("u", 1)


def test_a_stray_partition_dir_makes_a_create_conflict(tmp_path: Path, make_manager: MakeManager) -> None:
    log_dir = tmp_path / "logs"
    manager = make_manager(log_dir)
    (log_dir / "t-0").mkdir()  # appeared after start-up (another process), not a loaded partition

    with pytest.raises(ConflictError, match="partition dir t-0 already exists"):
        manager.create_topic("t", 1)
    assert manager.offline_dirs == {}

"""A closed log refuses every read and write and never reopens a file by path; an I/O error
while appending or flushing takes the log offline at once.

The race the probe found: a produce holding a deleted topic's log appended after the delete and the
re-create, and the segment reopened its ``.log`` by path, which by then named the new topic's file.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator

import pytest

from service.base.clock import ManualClock
from service.base.errors import LogClosedError, LogDirOfflineError, NotFoundError
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record
from tests.service.storage.conftest import MakeLog, OpenLog


def _records(prefix: bytes, count: int) -> list[Record]:
    return [Record(0, 1_000, None, prefix + b"%d" % i) for i in range(count)]


def _delete_and_recreate(log: PartitionLog, clock: ManualClock) -> PartitionLog:
    """What a topic delete and re-create do to the dir: rename it away, create a new log at its path."""
    directory = log.directory
    directory.rename(directory.with_name(directory.name + ".x-delete"))
    directory.mkdir()
    return load_partition_log(directory, LogConfig(), clock=clock).log


def test_a_closed_log_refuses_every_read_and_write(make_log: MakeLog) -> None:
    log = make_log()
    log.append_records(_records(b"a", 3))
    log.close(deleted=True)
    assert log.is_closed
    refused: list[Callable[[], object]] = [
        lambda: log.append_records(_records(b"b", 1)),
        lambda: log.read(0),
        lambda: list(log.read_batches(0)),
        lambda: log.roll(),
        lambda: log.flush(),
        lambda: log.increment_log_start_offset(1),
        lambda: log.delete_oldest_segments(1),
    ]
    for call in refused:
        with pytest.raises(LogClosedError, match=r"topic-0 was deleted") as caught:
            call()
        assert isinstance(caught.value, NotFoundError)  # the API answers 404
    log.close()  # a second close is a no-op


def test_an_append_after_close_never_reaches_the_recreated_topic(
    make_log: MakeLog, clock: ManualClock
) -> None:
    old = make_log()
    old.append_records(_records(b"old", 5))
    old.close(deleted=True)
    new = _delete_and_recreate(old, clock)
    new_file = new.active_segment.log_path

    with pytest.raises(LogClosedError):
        old.append_records(_records(b"old-late", 5))

    assert new_file.stat().st_size == 0
    new.append_records(_records(b"new", 2))
    assert [r.value for r in new.read(0)] == [b"new0", b"new1"]


def test_a_read_started_before_close_never_reads_the_recreated_topic(
    make_log: MakeLog, clock: ManualClock
) -> None:
    old = make_log()
    for i in range(4):
        old.append_records(_records(b"old%d-" % i, 2))
    reader: Iterator[object] = iter(old.read_batches(0))
    old.close(deleted=True)
    new = _delete_and_recreate(old, clock)
    new.append_records(_records(b"new", 8))

    with pytest.raises(LogClosedError):
        next(reader)


def test_a_read_in_progress_stops_at_close(make_log: MakeLog) -> None:
    log = make_log()
    for i in range(4):
        log.append_records(_records(b"r%d-" % i, 2))
    reader = log.read_batches(0)
    assert next(reader).base_offset == 0
    log.close()
    with pytest.raises(LogClosedError):
        next(reader)


class _FailingWrites:
    """``os.pwrite`` that fails with ENOSPC once armed: a full disk, injected at the file layer."""

    def __init__(self) -> None:
        self.armed = False
        self._pwrite = os.pwrite

    def __call__(self, fd: int, data: bytes, offset: int) -> int:
        if self.armed:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._pwrite(fd, data, offset)


@pytest.fixture
def failing_writes(monkeypatch: pytest.MonkeyPatch) -> _FailingWrites:
    fault = _FailingWrites()
    monkeypatch.setattr(os, "pwrite", fault)
    return fault


def test_an_io_error_on_append_takes_the_log_offline(
    make_log: MakeLog, open_log: OpenLog, failing_writes: _FailingWrites
) -> None:
    log = make_log()
    reported: list[OSError] = []
    log.on_io_error = lambda failed, exc: reported.append(exc)
    acknowledged = log.append_records(_records(b"kept", 3))

    failing_writes.armed = True
    with pytest.raises(LogDirOfflineError, match="is offline") as caught:
        log.append_records(_records(b"lost", 3))
    failing_writes.armed = False

    assert caught.value.log_dir == str(log.directory.parent)
    assert log.is_offline and [e.errno for e in reported] == [errno.ENOSPC]
    with pytest.raises(LogDirOfflineError):  # refused from now on, though the disk works again
        log.append_records(_records(b"later", 1))
    with pytest.raises(LogDirOfflineError):
        log.read(0)
    log.abandon()

    reloaded = open_log().log  # an unclean restart: recovery keeps what was acknowledged
    assert [r.value for r in reloaded.read(0)] == [b"kept0", b"kept1", b"kept2"]
    assert reloaded.log_end_offset == acknowledged.last_offset + 1


def test_an_io_error_on_flush_takes_the_log_offline(
    make_log: MakeLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log()
    log.append_records(_records(b"a", 2))

    def fsync_fails(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", fsync_fails)
    with pytest.raises(LogDirOfflineError, match=r"Input/output error"):
        log.flush()
    assert log.is_offline

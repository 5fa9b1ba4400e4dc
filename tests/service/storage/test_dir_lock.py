"""LogDirLock: one owner per log dir, across processes (ours and Kafka's) and within this process."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from service.base.errors import ConflictError
from service.storage.dir_lock import LogDirLock
from service.storage.log_files import LOCK_FILE
from tests.paths import REPO as REPO_ROOT

# Holds a lock on argv[1] until stdin closes. argv[2]: "logcleaner" (LogDirLock) or "kafka" (a POSIX
# record lock only, which is what Java's FileChannel.tryLock takes on Linux).
_HOLDER = """
import fcntl, os, sys
from pathlib import Path
from service.storage.dir_lock import LogDirLock
if sys.argv[2] == "kafka":
    fd = os.open(os.path.join(sys.argv[1], ".lock"), os.O_RDWR | os.O_CREAT)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
else:
    LogDirLock(Path(sys.argv[1])).acquire()
print("locked", flush=True)
sys.stdin.read()
"""

_TRY_LOCK = """
import sys
from pathlib import Path
from service.base.errors import ConflictError
from service.storage.dir_lock import LogDirLock
try:
    with LogDirLock(Path(sys.argv[1])):
        print("acquired")
except ConflictError as exc:
    print(exc)
    sys.exit(3)
"""


def _python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


@contextmanager
def _held_by_other_process(log_dir: Path, kind: str = "logcleaner") -> Iterator[None]:
    holder = subprocess.Popen(
        _python(_HOLDER, str(log_dir), kind),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "locked"
        yield
    finally:
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()


def test_lock_creates_lock_file_and_releases(tmp_path: Path) -> None:
    lock = LogDirLock(tmp_path)
    assert not lock.is_held

    lock.acquire()
    assert lock.is_held
    assert (tmp_path / LOCK_FILE).exists()

    lock.release()
    assert not lock.is_held
    assert (tmp_path / LOCK_FILE).exists()  # never deleted, as in Kafka
    lock.release()  # idempotent


def test_context_manager_releases_on_exit(tmp_path: Path) -> None:
    with LogDirLock(tmp_path) as lock:
        assert lock.is_held
    assert not lock.is_held
    with LogDirLock(tmp_path):  # free again
        pass


def test_second_lock_in_same_process_conflicts(tmp_path: Path) -> None:
    with LogDirLock(tmp_path), pytest.raises(ConflictError, match=str(tmp_path)):
        LogDirLock(tmp_path).acquire()


@pytest.mark.slow
def test_failed_second_lock_does_not_drop_the_first(tmp_path: Path) -> None:
    """A POSIX lock dies with any close of the file in this process; the refused lock must not close it."""
    with LogDirLock(tmp_path):
        with pytest.raises(ConflictError):
            LogDirLock(tmp_path).acquire()
        result = subprocess.run(_python(_TRY_LOCK, str(tmp_path)), capture_output=True, text=True, env=_env())
        assert result.returncode == 3, result.stderr


def test_same_lock_twice_conflicts(tmp_path: Path) -> None:
    with LogDirLock(tmp_path) as lock, pytest.raises(ConflictError):
        lock.acquire()


def test_flock_on_a_second_descriptor_conflicts_in_process(tmp_path: Path) -> None:
    """The Linux fact the lock relies on: flock belongs to the open file description, not the process."""
    path = tmp_path / LOCK_FILE
    first = os.open(path, os.O_RDWR | os.O_CREAT)
    second = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(first, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(BlockingIOError):
            fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(second)
        os.close(first)


@pytest.mark.slow
def test_lock_held_by_other_logcleaner_conflicts_then_frees(tmp_path: Path) -> None:
    with _held_by_other_process(tmp_path):
        with pytest.raises(ConflictError) as info:
            LogDirLock(tmp_path).acquire()
        message = str(info.value)
        assert str(tmp_path) in message
        assert "another logcleaner or a Kafka broker is using it" in message

    with LogDirLock(tmp_path) as lock:
        assert lock.is_held


@pytest.mark.slow
def test_lock_held_by_kafka_style_posix_lock_conflicts(tmp_path: Path) -> None:
    with _held_by_other_process(tmp_path, kind="kafka"), pytest.raises(ConflictError, match="Kafka broker"):
        LogDirLock(tmp_path).acquire()

    with LogDirLock(tmp_path):
        pass


@pytest.mark.slow
def test_other_process_cannot_lock_while_held(tmp_path: Path) -> None:
    with LogDirLock(tmp_path):
        refused = subprocess.run(
            _python(_TRY_LOCK, str(tmp_path)), capture_output=True, text=True, env=_env()
        )
    assert refused.returncode == 3, refused.stderr
    assert str(tmp_path) in refused.stdout

    allowed = subprocess.run(_python(_TRY_LOCK, str(tmp_path)), capture_output=True, text=True, env=_env())
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.strip() == "acquired"


def test_missing_log_dir_raises_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        LogDirLock(tmp_path / "absent").acquire()

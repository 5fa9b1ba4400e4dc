"""``logcleaner serve`` as a real subprocess: clean shutdown on SIGTERM, the dir lock, recovery on restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service.clock import SystemClock
from service.storage.checkpoints import OffsetCheckpointFile, read_clean_shutdown_marker
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition

REPO = Path(__file__).resolve().parents[2]


def start_serve(log_dir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "service", "-v", "serve", "--override", f"log.dirs={log_dir}"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for_load(proc: subprocess.Popen[bytes], log_dir: Path, timeout_s: float = 20.0) -> None:
    """Loading removes the clean-shutdown marker and takes the lock: wait until the lock is held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import fcntl,sys; f=open(sys.argv[1],'a'); fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)",
                str(log_dir / ".lock"),
            ],
            capture_output=True,
        )
        if probe.returncode != 0 and read_clean_shutdown_marker(log_dir) is None:
            return
        assert proc.poll() is None, proc.communicate()[1].decode()
        time.sleep(0.1)
    pytest.fail("serve did not load its log dir in time")


def write_log(log_dir: Path, count: int) -> None:
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=500), clock=SystemClock())
    if not loaded.logs:
        (log_dir / "orders-0").mkdir()
        loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=500), clock=SystemClock())
    log = loaded.logs[TopicPartition("orders", 0)]
    for i in range(count):
        log.append_records([Record(0, 1000 + i, b"k%d" % i, b"v%d" % i)])
    close_log_dir(loaded)


@pytest.mark.slow
def test_sigterm_shuts_down_cleanly_and_a_second_instance_is_refused(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    write_log(log_dir, 30)
    proc = start_serve(log_dir)
    wait_for_load(proc, log_dir)
    second = subprocess.run(
        [sys.executable, "-m", "service", "serve", "--override", f"log.dirs={log_dir}"],
        cwd=REPO,
        capture_output=True,
        timeout=60,
    )
    assert second.returncode == 2
    assert str(log_dir) in second.stderr.decode() and "another" in second.stderr.decode()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr.decode()
    assert read_clean_shutdown_marker(log_dir) is not None
    recovery_points = OffsetCheckpointFile(log_dir / "recovery-point-offset-checkpoint").read()
    assert recovery_points == {TopicPartition("orders", 0): 30}


@pytest.mark.slow
def test_sigkill_then_restart_recovers(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    write_log(log_dir, 20)
    proc = start_serve(log_dir)
    wait_for_load(proc, log_dir)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert read_clean_shutdown_marker(log_dir) is None, "no marker after a kill"
    with open(sorted((log_dir / "orders-0").glob("*.log"))[-1], "ab") as f:
        f.write(os.urandom(23))  # a torn write at the tail
    proc = start_serve(log_dir)
    wait_for_load(proc, log_dir)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr.decode()
    assert "truncating" in stderr.decode()
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=500), clock=SystemClock())
    log = loaded.logs[TopicPartition("orders", 0)]
    assert log.log_end_offset == 20
    assert [r.value for r in log.read(0, 100)] == [b"v%d" % i for i in range(20)]

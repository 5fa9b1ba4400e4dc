"""``logcleaner serve`` as a real subprocess for the tests that need one (its log read line by line), and a
free port."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from service.base.clock import SystemClock
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.paths import REPO


class Serve:
    """``logcleaner -v serve`` as a real subprocess; a thread collects its stderr (the log) line by line."""

    def __init__(self, log_dir: Path, *overrides: str, command: Sequence[str] = ()) -> None:
        """``serve`` on ``log_dir`` with ``overrides``, or as ``command`` says (then ``log_dir`` and
        ``overrides`` are the command's to give)."""
        args = list(command) or [
            sys.executable,
            "-m",
            "service",
            "-v",
            "serve",
            "--override",
            f"log.dirs={log_dir}",
        ]
        if not command:
            args += ["--override", "api.port=0"]  # any free port: tests run in parallel with other servers
            for override in overrides:
                args += ["--override", override]
        self.proc = subprocess.Popen(
            args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def wait_for(self, text: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if text in self.log:
                return
            if self.proc.poll() is not None:
                self.stop()
                pytest.fail(f"serve exited with {self.proc.returncode} before logging {text!r}:\n{self.log}")
            time.sleep(0.05)
        pytest.fail(f"serve did not log {text!r} within {timeout_s} s:\n{self.log}")

    def stop(self, signum: int = signal.SIGTERM) -> int:
        self.proc.send_signal(signum)
        returncode = self.proc.wait(timeout=30)
        self._reader.join(timeout=5)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return returncode


def write_log(log_dir: Path, count: int) -> None:
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=500), clock=SystemClock())
    if not loaded.logs:
        (log_dir / "orders-0").mkdir()
        loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=500), clock=SystemClock())
    log = loaded.logs[TopicPartition("orders", 0)]
    for i in range(count):
        log.append_records([Record(0, 1000 + i, b"k%d" % i, b"v%d" % i)])
    close_log_dir(loaded)


READY = "logcleaner started"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port

"""The daemon's lifecycle: a failed start changes nothing, the API answers while the logs load, a stop is
bounded and never writes the clean-shutdown marker unless it was clean (real subprocesses, real HTTP)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.config.broker_config import BrokerConfig
from service.shell.daemon import Daemon
from service.storage.clean_shutdown import read_clean_shutdown_marker
from service.storage.log_config import LogConfig
from tests.paths import REPO
from tests.service.serve_process import READY, Serve, write_log
from tests.service.stop_helpers import api_url, fetch_all


def dir_checksums(root: Path) -> dict[str, str]:
    """Every file and dir under ``root`` → the SHA-256 of its bytes (dirs: "dir")."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        out[key] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


def test_a_start_on_a_taken_port_exits_1_with_the_log_dir_byte_identical(
    tmp_path: Path, taken_port: int
) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    write_log(log_dir, 40)  # timestamps of 1970: time retention would delete every closed segment at once
    (log_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)  # and recovery would run on start
    before = dir_checksums(log_dir)
    assert sum(1 for name in before if name.endswith(".log")) > 3
    began = time.monotonic()
    result = subprocess.run(
        [
            *(sys.executable, "-m", "service", "serve", "--override", f"log.dirs={log_dir}"),
            *("--override", f"api.port={taken_port}", "--override", "scheduler.initial.delay.ms=0"),
            *("--override", "log.cleaner.engine=in-process"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert time.monotonic() - began < 10
    assert result.returncode == 1, result.stderr
    assert f"127.0.0.1:{taken_port}" in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("logcleaner: error")]
    assert len(errors) == 1, result.stderr
    assert dir_checksums(log_dir) == before


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_api_answers_while_the_logs_load(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    for name in ("a-0", "b-0", "c-0"):
        (log_dir / name).mkdir()
    broker, _ = BrokerConfig.from_properties(
        {"log.dirs": str(log_dir), "api.port": "0", "scheduler.initial.delay.ms": "3600000"}
        | {"log.cleaner.engine": "in-process", "log.cleaner.threads": "0"}
    )
    daemon = Daemon(broker)
    release = threading.Event()
    config_for = daemon.log_manager.config_for

    def slow_config_for(topic: str) -> LogConfig:  # the hook: the first log's load waits for the test
        release.wait(20)
        return config_for(topic)

    daemon.log_manager.config_for = slow_config_for
    starter = threading.Thread(target=daemon.start, daemon=True)
    starter.start()
    try:
        deadline = time.monotonic() + 20
        while daemon.api_server is None or daemon.api_server.port is None:
            assert time.monotonic() < deadline, "the API did not listen before the logs loaded"
            time.sleep(0.01)
        url = daemon.api_server.url
        assert _get(url + "/healthz")[0] == 200
        status, body = _get(url + "/readyz")  # the API may listen before the log dir is listed
        assert status == 503 and json.loads(body)["detail"].startswith("loading: 0 of ")
        while daemon.log_manager.load_progress.counts != (0, 3):  # listed; the first load waits
            assert time.monotonic() < deadline, "the log dir's three logs were never counted"
            time.sleep(0.01)
        status, body = _get(url + "/readyz")
        assert status == 503 and json.loads(body)["detail"] == "loading: 0 of 3 logs"
        status, body = _get(url + "/v1/topics")
        assert status == 503 and json.loads(body)["detail"] == "loading: 0 of 3 logs"
        status, metrics = _get(url + "/metrics")
        assert status == 200
        assert "logcleaner_logs_to_load 3.0" in metrics and "logcleaner_logs_loaded 0.0" in metrics
        release.set()
        starter.join(20)
        assert _get(url + "/readyz")[0] == 200
        assert _get(url + "/v1/topics")[0] == 200
        assert "logcleaner_logs_loaded 3.0" in _get(url + "/metrics")[1]
    finally:
        release.set()
        starter.join(20)
        daemon.shutdown()


def test_readyz_answers_503_as_soon_as_the_stop_signal_arrives(tmp_path: Path) -> None:
    """A load balancer stops sending work the moment the stop begins, before the API itself stops."""
    broker, _ = BrokerConfig.from_properties(
        {"log.dirs": str(tmp_path / "logs"), "api.port": "0", "scheduler.initial.delay.ms": "3600000"}
    )
    daemon = Daemon(broker)
    daemon.start()
    try:
        assert daemon.api_server is not None
        url = daemon.api_server.url
        assert _get(url + "/readyz")[0] == 200
        daemon.request_stop(signal.SIGTERM)  # what the handler does; the main loop would now shut down
        status, body = _get(url + "/readyz")
        assert status == 503 and json.loads(body)["detail"] == "stopping"
        assert _get(url + "/v1/topics")[0] == 503
        assert _get(url + "/healthz")[0] == 200  # alive: a stop is not a reason to restart it
    finally:
        daemon.shutdown()


# A daemon whose retention task never returns: the stop can only be abandoned.
_HUNG_TASK_DAEMON = """
import signal, sys, threading
from service.config.broker_config import BrokerConfig
from service.shell.daemon import Daemon
broker, _ = BrokerConfig.from_properties({
    "log.dirs": sys.argv[1], "api.port": "0", "scheduler.initial.delay.ms": "0",
    "log.cleaner.engine": "in-process", "shutdown.timeout.ms": sys.argv[2],
})
daemon = Daemon(broker)
started = threading.Event()
def never_returns() -> None:
    started.set()
    threading.Event().wait()
daemon.scheduler.add_periodic("test-hung-task", 3_600_000, never_returns)
daemon.start()
daemon.install_signal_handlers()  # before the test is told to signal
started.wait()
print("task running", flush=True)
try:
    daemon.run_until_stopped()
finally:
    daemon.shutdown()
"""


def _hung_daemon(log_dir: Path, timeout_ms: int) -> subprocess.Popen[str]:
    """A daemon over ``log_dir`` (made, with one 10-record log) whose scheduled task never returns."""
    log_dir.mkdir()
    write_log(log_dir, 10)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HUNG_TASK_DAEMON, str(log_dir), str(timeout_ms)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "task running\n"
    return proc


def _exit_1_within_5_s(proc: subprocess.Popen[str], began: float) -> str:
    """Its stderr, once it exited 1 within 5 s of ``began``."""
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 1, stderr
    assert time.monotonic() - began < 5
    return stderr


def test_a_stop_past_shutdown_timeout_exits_1_without_the_marker(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    proc = _hung_daemon(log_dir, 500)
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    stderr = _exit_1_within_5_s(proc, began)
    assert "still running: scheduled task test-hung-task" in stderr
    assert read_clean_shutdown_marker(log_dir) is None
    restarted = Serve(log_dir, "scheduler.initial.delay.ms=3600000", "log.cleaner.enable=false")
    restarted.wait_for(READY)
    assert "1 logs loaded (1 recovered)" in restarted.log
    with httpx.Client(base_url=api_url(restarted), timeout=30) as client:
        (partition,) = client.get("/v1/topics/orders").json()["partitions"]
        served = fetch_all(client, "orders", 0)
    assert restarted.stop() == 0, restarted.log
    assert partition["log_end_offset"] == 10  # nothing lost (retention may have deleted old segments)
    assert sorted(served) == list(range(partition["log_start_offset"], 10))


def test_a_second_signal_exits_at_once_without_the_marker(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    proc = _hung_daemon(log_dir, 600_000)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stderr = _exit_1_within_5_s(proc, began)
    assert "again: exiting now" in stderr
    assert read_clean_shutdown_marker(log_dir) is None

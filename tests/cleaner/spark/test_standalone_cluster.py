"""``logcleaner clean`` against a real Spark standalone cluster: a master and a worker started on 127.0.0.1
from the installed pyspark (as ``deploy/spark/standalone.sh`` does), the result equal to the in-process
engine's byte for byte, the cluster stopped whatever happens."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paths import REPO

_WORKER = "org.apache.spark.deploy.worker.Worker"
_MASTER = "org.apache.spark.deploy.master.Master"

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None, reason="Java is not installed: a Spark standalone cluster needs Java 17+"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _spark_env(state: Path) -> dict[str, str]:
    import pyspark

    return {
        **os.environ,
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOG_DIR": str(state / "logs"),
        "SPARK_PID_DIR": str(state / "pids"),
        "SPARK_WORKER_DIR": str(state / "work"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": str(REPO),  # executors import this tree's code, as the driver does
    }


def _daemon(env: dict[str, str], *args: str) -> None:
    script = Path(env["SPARK_HOME"]) / "sbin" / "spark-daemon.sh"
    subprocess.run([str(script), *args], env=env, check=True, capture_output=True, timeout=60)


def _wait_for_log(log_dir: Path, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(text in p.read_text(errors="replace") for p in log_dir.glob("*Worker*.out")):
            return
        time.sleep(0.2)
    logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in log_dir.glob("*.out"))
    pytest.fail(f"the worker did not log {text!r} within {timeout_s} s:\n{logs}")


@pytest.fixture
def standalone_master(tmp_path: Path) -> Iterator[str]:
    """A master and one worker (2 cores, 1 GiB) on free ports; stopped in the teardown, also on failure."""
    state = tmp_path / "spark"
    for name in ("logs", "pids", "work"):
        (state / name).mkdir(parents=True)
    env = _spark_env(state)
    port = _free_port()
    master = f"spark://127.0.0.1:{port}"
    try:
        _daemon(env, "start", _MASTER, "1", "--host", "127.0.0.1", "--port", str(port), "--webui-port", "0")
        _daemon(
            env, "start", _WORKER, "1", "--host", "127.0.0.1", "--cores", "2", "--memory", "1g",
            "--webui-port", "0", master,
        )  # fmt: skip
        _wait_for_log(state / "logs", "Successfully registered with master", timeout_s=60)
        yield master
    finally:
        for daemon in (_WORKER, _MASTER):
            subprocess.run(
                [str(Path(env["SPARK_HOME"]) / "sbin" / "spark-daemon.sh"), "stop", daemon, "1"],
                env=env,
                check=False,
                capture_output=True,
                timeout=60,
            )


def _logcleaner(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _files(log_dir: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(log_dir)): p.read_bytes()
        for p in sorted(log_dir.rglob("*"))
        if p.is_file() and p.suffix in {".log", ".index", ".timeindex", ".txnindex"}
    }


@pytest.mark.slow
def test_clean_on_a_standalone_cluster_equals_the_in_process_engine(
    tmp_path: Path, standalone_master: str
) -> None:
    gen = [
        "gen",
        "--log-dir",
        str(tmp_path / "spark"),
        "--records",
        "4000",
        "--keys",
        "300",
        "--partitions",
        "3",
    ]
    gen += [
        "--batch-size",
        "50",
        "--value-size",
        "20",
        "--segment-bytes",
        "16384",
        "--cleanup-policy",
        "compact",
    ]
    assert _logcleaner(*gen).returncode == 0  # no tombstones: no horizon stamped from the wall clock
    shutil.copytree(tmp_path / "spark", tmp_path / "in-process")
    before = _files(tmp_path / "spark")

    on_cluster = _logcleaner(
        "clean", "--json", "--override", f"log.dirs={tmp_path / 'spark'}",
        "--override", "log.cleaner.engine=spark", "--override", f"spark.master={standalone_master}",
        "--override", "spark.executor.memory=512m", "--override", f"spark.executorEnv.PYTHONPATH={REPO}",
    )  # fmt: skip
    assert on_cluster.returncode == 0, on_cluster.stderr[-3000:]
    in_process = _logcleaner(
        "clean", "--json", "--override", f"log.dirs={tmp_path / 'in-process'}",
        "--override", "log.cleaner.engine=in-process",
    )  # fmt: skip
    assert in_process.returncode == 0, in_process.stderr[-3000:]

    cleaned = json.loads(on_cluster.stdout)["cleaned"]
    assert [entry["engine"] for entry in cleaned] == ["spark"] * 3  # the 3 logs in one job, on the cluster
    assert _files(tmp_path / "spark") != before, "the round rewrote something"
    assert _files(tmp_path / "spark") == _files(tmp_path / "in-process")

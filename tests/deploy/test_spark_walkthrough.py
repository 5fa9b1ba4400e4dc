"""``deploy/README.md``'s Spark standalone walkthrough, run as written on one machine:
``standalone.sh start``, ``serve --config deploy/spark/server.properties`` (its REST API on 8080 beside the
master's web UI), a cleaning round on the cluster, then both stopped. Only ``log.dirs`` is moved into the
test's dir."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.paths import REPO

STANDALONE = REPO / "deploy" / "spark" / "standalone.sh"
CONFIG = REPO / "deploy" / "spark" / "server.properties"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("java") is None, reason="a Spark standalone cluster needs Java 17+"),
]


def test_the_walkthrough_compacts_on_the_cluster(tmp_path: Path) -> None:
    venv_bin = str(Path(sys.executable).parent)  # ". .venv/bin/activate": the workers' python3 is this one
    env = {**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}", "TMPDIR": str(tmp_path)}
    logs = tmp_path / "kafka-logs"
    gen = ["logcleaner", "gen", "--log-dir", str(logs), "--records", "20000", "--keys", "500"]
    gen += ["--cleanup-policy", "compact", "--segment-bytes", "262144"]
    subprocess.run(gen, env=env, check=True, capture_output=True, timeout=120)
    subprocess.run(["sh", str(STANDALONE), "start"], env=env, check=True, capture_output=True, timeout=120)
    serve = None
    try:
        command = ["logcleaner", "serve", "--config", str(CONFIG), "--override", f"log.dirs={logs}"]
        serve = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        runs = wait_for_a_spark_round(serve)
        assert runs and {run["engine"] for run in runs} == {"spark"}, runs
    finally:
        if serve is not None:
            serve.send_signal(signal.SIGTERM)
            serve.communicate(timeout=120)
        subprocess.run(
            ["sh", str(STANDALONE), "stop"], env=env, check=False, capture_output=True, timeout=120
        )
    assert serve.returncode == 0


def wait_for_a_spark_round(serve: subprocess.Popen[str], timeout_s: float = 300.0) -> list[dict[str, object]]:
    """The cleaner's last rounds, once one is done (``serve`` on api.port 8080, as the file says)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if serve.poll() is not None:
            _, err = serve.communicate()
            pytest.fail(f"serve exited with {serve.returncode}:\n{err}")
        try:
            runs = httpx.get("http://127.0.0.1:8080/v1/cleaner", timeout=10).json().get("last_runs", [])
        except (httpx.HTTPError, ValueError):
            runs = []
        if runs:
            return list(runs)
        time.sleep(1)
    serve.send_signal(signal.SIGTERM)
    _, err = serve.communicate(timeout=120)
    pytest.fail(f"no cleaning round within {timeout_s} s:\n{err[-4000:]}")

"""What ``serve`` prints without ``-v``: a start-up line naming the log dirs as paths, a shutdown line; ``-q``
prints neither."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.paths import REPO
from tests.service.serve_process import free_port


def serve_until_ready_then_stop(log_dirs: list[Path], *flags: str) -> tuple[int, str]:
    """Run ``serve`` until ``/readyz`` answers 200, stop it with SIGTERM; return its exit code and stderr."""
    port = free_port()
    args = [sys.executable, "-m", "service", "serve", *flags]
    args += ["--override", f"log.dirs={','.join(map(str, log_dirs))}", "--override", f"api.port={port}"]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    break
        except (urllib.error.URLError, ConnectionError):
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"serve did not get ready: {proc.communicate()[1]}")
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    return proc.returncode, stderr


@pytest.mark.slow
def test_serve_prints_a_start_up_line_with_the_log_dirs_as_paths_and_a_shutdown_line(tmp_path: Path) -> None:
    log_dirs = [tmp_path / "a", tmp_path / "b"]
    for partition, log_dir in enumerate(log_dirs):
        (log_dir / f"orders-{partition}").mkdir(parents=True)
    code, stderr = serve_until_ready_then_stop(log_dirs)
    assert code == 0, stderr
    [started] = [line for line in stderr.splitlines() if "logcleaner started" in line]
    assert f"2 logs loaded (2 recovered) from {log_dirs[0]}, {log_dirs[1]};" in started
    assert "PosixPath" not in stderr and "[" not in started
    assert "Shut down cleanly in" in stderr


@pytest.mark.slow
def test_serve_q_prints_nothing(tmp_path: Path) -> None:
    code, stderr = serve_until_ready_then_stop([tmp_path / "logs"], "-q")
    assert code == 0, stderr
    assert stderr == ""


@pytest.mark.slow
def test_serve_warns_of_a_value_ending_in_what_looks_like_a_comment(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text(
        "# the app name in Spark's UI\nspark.app.name=logcleaner   # ours\n", encoding="latin-1"
    )
    code, stderr = serve_until_ready_then_stop([tmp_path / "logs"], "-q", "--config", str(config))
    assert code == 0, stderr
    [warning] = stderr.splitlines()
    assert (
        f"WARNING service.shell.tools.log_commands: config file {config}, line 2: "
        "the value of 'spark.app.name'" in warning
    )


@pytest.mark.slow
def test_serve_names_the_absolute_log_dir_when_it_comes_from_the_default(tmp_path: Path) -> None:
    """With no log.dirs the embedded ./data/logs follows the working directory: the line says where."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [sys.executable, "-m", "service", "serve", "--override", "api.port=0"]
    proc = subprocess.Popen(
        args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "logcleaner started" in line:
            break
    proc.send_signal(signal.SIGTERM)
    lines += proc.stderr.readlines()
    proc.stderr.close()
    assert proc.wait(timeout=30) == 0, "".join(lines)
    [said] = [line for line in lines if "log.dirs and log.dir are not set" in line]
    assert said.rstrip().endswith(
        f"using the embedded default ./data/logs, here {tmp_path / 'data' / 'logs'}"
    )
    assert (tmp_path / "data" / "logs").is_dir()
    code, stderr = serve_until_ready_then_stop([tmp_path / "explicit"])
    assert code == 0 and "are not set" not in stderr, "said only when the default applies"

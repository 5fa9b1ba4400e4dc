"""The README's CLI tour as a new user runs it, command by command: each one succeeds on the files the
commands before it wrote. Only the log dir (``/tmp/logs``) is moved into the test's own folder, and
``serve`` gets any free port (the README's 8080 may be taken); it runs until it has started, then gets
a SIGTERM, as the tour says."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README_LOG_DIR = "/tmp/logs"
STARTED = "logcleaner started"


def tour_commands() -> list[str]:
    """The shell commands of the README's first ``sh`` block under "## CLI tour", continuations joined."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("\n## CLI tour\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    lines = block.replace("\\\n", " ").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def logcleaner_env() -> dict[str, str]:
    """``logcleaner`` on PATH: the installed entry point, next to this Python."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_until_started(command: str, env: dict[str, str]) -> int:
    """``serve``: start it, wait for its start-up to finish, stop it with SIGTERM; its exit code."""
    proc = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    deadline, log = time.monotonic() + 60, ""
    try:
        for line in proc.stderr:
            log += line
            if STARTED in line or time.monotonic() > deadline:
                break
        assert STARTED in log, f"serve did not start:\n{log}"
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    env = logcleaner_env()
    assert shutil.which("logcleaner", path=env["PATH"]), "logcleaner is not installed (pip install -e .)"
    commands = tour_commands()
    assert commands[0].startswith("logcleaner gen") and commands[-1].startswith("logcleaner -v serve")
    log_dir = str(tmp_path / "logs")
    for command in commands:
        line = command.replace(README_LOG_DIR, log_dir)
        if " serve " in f"{line} ":
            assert run_until_started(f"{line} --override api.port=0", env) == 0
            continue
        done = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{command}\nexit {done.returncode}: {done.stderr[-2000:]}"
        assert done.stdout.strip(), f"{command}: printed nothing"

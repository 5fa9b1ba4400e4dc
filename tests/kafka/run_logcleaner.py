"""``python -m service`` as a user runs it on a broker's log dir: one subprocess per command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.paths import REPO

__all__ = ["REPO", "logcleaner", "logcleaner_json", "log_dir_options"]

TIMEOUT_S = 300.0


def log_dir_options(log_dir: Path, *overrides: str) -> list[str]:
    """``--override`` options for ``log_dir`` with the in-process engine (Spark's start-up would cost more
    than these logs take to clean), then ``overrides``."""
    options = ["--override", f"log.dirs={log_dir}", "--override", "log.cleaner.engine=in-process"]
    for override in overrides:
        options += ["--override", override]
    return options


def logcleaner(*args: str) -> str:
    """Run ``python -m service ARGS``; its stdout, or an AssertionError with its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "service", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT_S,
    )
    if done.returncode != 0:
        raise AssertionError(f"logcleaner {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def logcleaner_json(*args: str) -> Any:
    """Run a ``--json`` command and parse its document."""
    return json.loads(logcleaner(*args, "--json"))

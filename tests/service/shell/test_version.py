"""``logcleaner --version``: the installed release and the Kafka log format, exit 0, by the entry point."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest

from service.shell.cli import main


def test_version_prints_the_release_and_the_kafka_log_format() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "service", "--version"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"logcleaner {version('logcleaner')} (Kafka 3.x/4.x log format, RecordBatch v2)\n"


def test_version_wins_over_a_command_and_runs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version", "clean", "--topic", "no-such-topic"]) == 0
    out, err = capsys.readouterr()
    assert (out.startswith("logcleaner "), err) == (True, "")


def test_the_help_names_the_version_flag() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "service", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    assert "--version" in done.stdout

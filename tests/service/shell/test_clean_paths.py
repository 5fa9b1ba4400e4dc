"""A cleaned log's bytes do not depend on how logcleaner was installed: ``logcleaner clean`` on the C path
(the cleaner's C loops re-compress through ``_codecs.c``) and on the pure-Python path
(``LOGCLEANER_PURE_PYTHON=1``) leave the same files, for every codec."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from service.shell.cli import main
from service.storage.compression import CompressionType


def clean(log_dir: Path, *, is_pure_python: bool) -> None:
    env = {key: value for key, value in os.environ.items() if key != "LOGCLEANER_PURE_PYTHON"}
    if is_pure_python:
        env["LOGCLEANER_PURE_PYTHON"] = "1"
    overrides = [f"log.dirs={log_dir}", "log.cleanup.policy=compact", "log.cleaner.engine=in-process"]
    command = [sys.executable, "-m", "service", "clean", "--json"]
    for override in overrides:
        command += ["--override", override]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [entry["engine"] for entry in json.loads(done.stdout)["cleaned"]] == ["in-process"]


@pytest.mark.parametrize("codec", [codec.label for codec in CompressionType])
def test_both_paths_write_the_same_cleaned_segments(tmp_path: Path, codec: str) -> None:
    written = tmp_path / "written"
    generated = main(
        [
            "gen",
            "--log-dir",
            str(written),
            "--records",
            "3000",
            "--keys",
            "200",
            "--batch-size",
            "50",
            "--value-size",
            "300",
            "--segment-bytes",
            "65536",
            "--timestamp-start",
            "1700000000000",
            "--compression",
            codec,
        ]
    )
    assert generated == 0
    by_c, by_python = tmp_path / "c", tmp_path / "python"
    shutil.copytree(written, by_c)
    shutil.copytree(written, by_python)
    clean(by_c, is_pure_python=False)
    clean(by_python, is_pure_python=True)
    segments = sorted(path.relative_to(by_c) for path in by_c.rglob("*.log"))
    assert segments == sorted(path.relative_to(by_python) for path in by_python.rglob("*.log"))
    before = {path.relative_to(written): path.read_bytes() for path in written.rglob("*.log")}
    after = {path: (by_c / path).read_bytes() for path in segments}
    assert after != before, "the cleaner rewrote segments"
    for path in segments:
        assert (by_python / path).read_bytes() == after[path], path

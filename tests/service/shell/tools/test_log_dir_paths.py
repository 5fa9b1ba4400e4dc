"""``log.dirs`` naming a file: every command, ``serve`` included, exits 2 with one line naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.paths import REPO


@pytest.mark.parametrize("command", [["explain"], ["retention", "--dry-run"], ["clean"], ["serve"]])
def test_a_log_dir_that_is_a_file_is_bad_input_named_in_one_line(tmp_path: Path, command: list[str]) -> None:
    file = tmp_path / "logs"
    file.write_text("not a dir")
    args = [sys.executable, "-m", "service", *command, "--override", f"log.dirs={file}"]
    args += ["--override", "api.port=0"] if command == ["serve"] else []
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"logcleaner: error: log dir {file} is a file, not a directory (log.dirs)\n"
    assert file.read_text() == "not a dir"


@pytest.mark.parametrize("command", [["explain"], ["retention", "--dry-run"], ["clean"], ["serve"]])
def test_a_log_dir_this_user_cannot_read_is_bad_input_named_in_one_line(command: list[str]) -> None:
    """As root, the command runs as ``nobody`` (root reads any dir); the dir is left as it was."""
    outer = Path(tempfile.mkdtemp(prefix="logcleaner-unreadable-"))
    try:
        outer.chmod(0o755)  # others may enter it, not the log dir inside
        log_dir = outer / "logs"
        (log_dir / "orders-0").mkdir(parents=True)
        log_dir.chmod(0)
        args = [sys.executable, "-m", "service", *command, "--override", f"log.dirs={log_dir}"]
        args += ["--override", "api.port=0"] if command == ["serve"] else []
        if os.geteuid() == 0:
            args = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *args]
        done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 2, done.stderr
        assert done.stderr == (
            f"logcleaner: error: log dir {log_dir} cannot be read by this user: "
            "permission denied (log.dirs)\n"
        )
        log_dir.chmod(0o755)
        assert [p.name for p in log_dir.iterdir()] == ["orders-0"]
    finally:
        (outer / "logs").chmod(0o755)
        shutil.rmtree(outer)

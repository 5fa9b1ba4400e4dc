"""``exit_process``: a process whose command left nothing to free (an inspection, a cleanly stopped
``serve``) ends without the interpreter's teardown, yet with everything it wrote flushed and its exit code;
any other command ends normally."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO
from tests.service.cli_logs import DAY_MS, make_old_logs, snapshot
from tests.service.cli_process import logcleaner


def test_an_inspection_ends_with_its_whole_answer_and_nothing_changed(tmp_path: Path) -> None:
    make_old_logs(tmp_path / "logs", partitions=40)
    before = snapshot(tmp_path / "logs")
    explained = logcleaner("explain", "--json", "--override", f"log.dirs={tmp_path / 'logs'}")
    assert explained.returncode == 0, explained.stderr
    partitions = json.loads(explained.stdout)["partitions"]  # the whole document, flushed before the exit
    assert sorted(doc["partition"] for doc in partitions) == list(range(40))
    dry_run = logcleaner(
        "retention",
        "--dry-run",
        "--override",
        f"log.dirs={tmp_path / 'logs'}",
        "--override",
        f"log.retention.ms={DAY_MS}",
    )
    assert dry_run.returncode == 0, dry_run.stderr
    assert dry_run.stdout.rstrip().endswith("would be deleted")
    assert snapshot(tmp_path / "logs") == before


def test_an_inspection_that_fails_keeps_its_exit_code_and_message(tmp_path: Path) -> None:
    make_old_logs(tmp_path / "logs", partitions=1)
    missing = logcleaner("explain", "--topic", "nope", "--override", f"log.dirs={tmp_path / 'logs'}")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1].startswith("logcleaner: error:")
    assert "nope" in missing.stderr


def test_only_a_command_that_left_nothing_to_free_skips_the_teardown(tmp_path: Path) -> None:
    """The interpreter's teardown runs the ``atexit`` handlers: an inspection's process never reaches them."""
    make_old_logs(tmp_path / "logs", partitions=1)
    entry = (
        "import atexit, sys\n"
        "from service.shell.cli import main\n"
        "from service.shell.process_exit import exit_process\n"
        "atexit.register(lambda: print('torn down', file=sys.stderr))\n"
        "exit_process(main(sys.argv[1:]))\n"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", entry, *args], capture_output=True, text=True, cwd=REPO, timeout=120
        )

    inspected = run("explain", "--override", f"log.dirs={tmp_path / 'logs'}")
    assert inspected.returncode == 0 and "torn down" not in inspected.stderr
    assert inspected.stdout.startswith(f"t-0 ({tmp_path / 'logs'}): offsets [0, 30)")
    versioned = run("--version")
    assert versioned.returncode == 0 and "torn down" in versioned.stderr

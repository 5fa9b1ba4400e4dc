"""The ``kafka-log`` snippet of ``docs/cleaner.md``, run as written (a fresh process, its own session) on a
new log."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

README_LOG_DIR = "/tmp/logs"
GEN_SHAPE = ("--partitions", "2", "--records", "1500", "--keys", "100", "--segment-bytes", "100000")


def readme_snippet() -> str:
    """The Python block that follows the sentence of ``docs/cleaner.md`` introducing the data source."""
    readme = (REPO / "docs" / "cleaner.md").read_text(encoding="utf-8")
    intro = readme.index("Spark data source is usable on its own")
    match = re.compile(r"```python\n(.*?)```", re.DOTALL).search(readme, intro)
    assert match is not None, "no python block after the data source's introduction"
    return match.group(1)


@pytest.mark.slow
def test_the_readme_data_source_snippet_runs_as_written(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    # The environment logcleaner is installed in comes first on PATH, as in an activated virtualenv.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": path}
    subprocess.run(
        [sys.executable, "-m", "service", "gen", "--log-dir", str(log_dir), *GEN_SHAPE],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
    )
    snippet = readme_snippet()
    assert README_LOG_DIR in snippet
    script = tmp_path / "snippet.py"
    script.write_text(snippet.replace(README_LOG_DIR, str(log_dir)), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,  # not the repository: the snippet's imports must work from anywhere
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    counts = re.findall(r"^\|\s*(gen-0)\|\s*(\d)\|\s*(\d+)\|$", done.stdout, re.MULTILINE)
    assert sorted(counts) == [("gen-0", "0", "1500"), ("gen-0", "1", "1500")], done.stdout
    offsets = re.findall(r"^\|\s*(\d+)\|", done.stdout, re.MULTILINE)
    assert offsets == ["1000", "1001", "1002"], done.stdout

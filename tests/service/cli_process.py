"""``logcleaner`` run as users run it: ``python -m service`` in a process of its own, from the repo."""

from __future__ import annotations

import subprocess
import sys

from tests.paths import REPO


def logcleaner(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The finished process, its output as text; never raises on a non-zero exit."""
    return subprocess.run(
        [sys.executable, "-m", "service", *args], capture_output=True, text=True, cwd=REPO, timeout=timeout
    )

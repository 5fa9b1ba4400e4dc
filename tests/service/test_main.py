"""``service/__main__.py``, the entry point of ``python -m service`` and the ``logcleaner`` script: the CLI's
modules are imported with the cyclic collector paused and frozen out of its view after; the command then
runs with the collector on, and its exit code is the process's."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from service.core.version import package_version
from tests.paths import REPO
from tests.service.cli_process import logcleaner

PROBE = textwrap.dedent(
    """
    import gc, json, sys
    from service.__main__ import run
    sys.argv = ["logcleaner", "--version"]
    seen = []  # (generation, objects frozen so far) of each collection once run() is called
    gc.collect()
    def note(phase, info):
        if phase == "start":
            seen.append((info["generation"], gc.get_freeze_count()))
    gc.callbacks.append(note)
    try:
        run()
    except SystemExit as exit:
        code = exit.code
    frozen, enabled = gc.get_freeze_count(), gc.isenabled()
    print(json.dumps({"code": code, "seen": seen, "frozen": frozen, "enabled": enabled}))
    """
)


def test_the_cli_is_imported_without_a_collection_then_frozen_and_the_command_runs_with_the_collector() -> (
    None
):
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert probe.returncode == 0, probe.stderr
    version_line, report_line = probe.stdout.strip().splitlines()
    assert package_version() in version_line
    report = json.loads(report_line)
    assert report["code"] == 0
    assert not [generation for generation, frozen in report["seen"] if frozen == 0]  # none while importing
    assert report["frozen"] > 10_000  # the CLI's modules, classes and functions
    assert report["enabled"]


def test_the_command_s_exit_code_is_the_process_s() -> None:
    bad = logcleaner("explain", "--override", "no.such.key")
    assert bad.returncode == 2
    assert bad.stderr.startswith("logcleaner: error:") and len(bad.stderr.splitlines()) == 1

"""The systemd unit: ``systemd-analyze verify`` accepts it without a warning, its hardening scores "OK"
in ``systemd-analyze security``, and it keeps the settings the service relies on.

``verify`` checks that ``ExecStart`` names an executable, so it runs on a copy whose ``ExecStart`` names
the ``logcleaner`` console script of the environment running the tests (where ``pip install`` put it, next
to the interpreter); everything else is the unit as shipped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.deploy_files import DEPLOY, broker_config

UNIT = DEPLOY / "systemd" / "logcleaner.service"
SHIPPED_BINARY = "/opt/logcleaner/bin/logcleaner"


def systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None:
        # Never a skip: CI must not let a broken unit land because the tool went missing.
        pytest.fail("systemd-analyze is not on PATH: install Debian's systemd package, as .ci/run does")
    return path


def settings() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def installed_binary() -> Path:
    """This environment's ``logcleaner``: in its ``bin/``, as ``/opt/logcleaner/bin`` is for the unit."""
    binary = Path(sys.executable).parent / "logcleaner"
    assert os.access(binary, os.X_OK), f"{binary} is missing: pip install -e . installs the console script"
    return binary


def checkable_copy(tmp_path: Path) -> Path:
    copy = tmp_path / UNIT.name
    text = UNIT.read_text()
    assert text.count(f"ExecStart={SHIPPED_BINARY} ") == 1
    copy.write_text(text.replace(f"ExecStart={SHIPPED_BINARY} ", f"ExecStart={installed_binary()} "))
    return copy


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    copy = checkable_copy(tmp_path)

    result = subprocess.run(
        [systemd_analyze(), "verify", str(copy)], capture_output=True, text=True, timeout=60, check=False
    )

    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if copy.name in line] == []
    assert "is not executable" not in result.stderr and "No such file" not in result.stderr


def test_the_hardening_scores_ok(tmp_path: Path) -> None:
    copy = checkable_copy(tmp_path)

    result = subprocess.run(
        [systemd_analyze(), "security", "--offline=true", "--no-pager", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    match = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", result.stdout)
    assert match is not None, result.stdout + result.stderr
    assert float(match.group(1)) <= 2.0 and match.group(2) == "OK", match.group(0)


def test_the_unit_keeps_what_the_service_needs() -> None:
    unit = settings()

    assert unit["ExecStart"] == [f"{SHIPPED_BINARY} serve --config /etc/logcleaner/server.properties"]
    # no -q above, and stderr left to the journal: the audit trail is what journalctl -u logcleaner shows
    assert (
        unit.get("StandardError", ["journal"]) == ["journal"]
        and "PYTHONUNBUFFERED=1" in unit["Environment"][0]
    )
    assert unit["Type"] == ["notify"] and unit["NotifyAccess"] == ["main"]
    assert unit["KillSignal"] == ["SIGTERM"]
    broker, _ = broker_config(DEPLOY / "config" / "server.properties")
    assert int(unit["TimeoutStopSec"][0]) * 1000 > broker.shutdown_timeout_ms  # the bound comes first
    assert unit["RestartPreventExitStatus"] == ["2"]  # a bad config does not restart-loop
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "CapabilityBoundingSet": "",
        "SystemCallFilter": "@system-service",
    }.items():
        assert unit[key] == [value], key
    assert {"AF_INET", "AF_INET6", "AF_UNIX"} <= set(unit["RestrictAddressFamilies"][0].split())
    assert "MemoryDenyWriteExecute" not in unit  # the JVM's JIT needs it off
    writable = [Path(p) for p in unit["ReadWritePaths"][0].split()]
    broker, _ = broker_config(DEPLOY / "config" / "server.properties")
    for log_dir in broker.log_dirs:
        assert any(Path(log_dir).is_relative_to(w) for w in writable), log_dir

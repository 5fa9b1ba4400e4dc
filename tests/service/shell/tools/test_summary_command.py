"""``logcleaner explain --summary``: every byte of every partition dir under one reason, what retention
deletes now (exactly what a retention pass then deletes), and what cleaning frees: measured to the byte by
``--exact``, and estimated from key sketches within 5% of what ``clean`` then frees on generated workloads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from service.core.compaction_estimate import SegmentSketches, round_segments
from service.core.summary import summary_parts
from service.shell.cli import main
from service.shell.tools.log_commands import load_config, read_only_log_manager
from tests.paths import REPO
from tests.service.unprivileged import as_unprivileged, open_folder

ENGINE = ("--override", "log.cleaner.engine=in-process")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def gen(capsys: pytest.CaptureFixture[str], log_dir: Path, *extra: str) -> None:
    code, _, err = run(capsys, "gen", "--log-dir", str(log_dir), *extra)
    assert code == 0, err


def log_bytes(log_dir: Path) -> int:
    return sum(p.stat().st_size for p in log_dir.rglob("*.log"))


def summary(capsys: pytest.CaptureFixture[str], log_dir: Path, *extra: str) -> dict[str, Any]:
    code, out, err = run(
        capsys, "explain", "--summary", "--json", "--override", f"log.dirs={log_dir}", *extra
    )
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    assert sum(h["bytes"] for h in doc["held"]) == doc["total_bytes"] == log_bytes(log_dir)
    return doc


def freed_by_clean(capsys: pytest.CaptureFixture[str], log_dir: Path) -> int:
    before = log_bytes(log_dir)
    code, _, err = run(capsys, "clean", "--override", f"log.dirs={log_dir}", *ENGINE)
    assert code == 0, err
    return before - log_bytes(log_dir)


COMPACTED = ("--cleanup-policy", "compact", "--segment-bytes", "100000", "--partitions", "2")
WORKLOADS = {
    "batches-of-10": (
        *COMPACTED, "--records", "10000", "--keys", "1000", "--tombstones", "0.05", "--batch-size", "10"
    ),
    "one-record-batches": (*COMPACTED, "--records", "6000", "--keys", "600", "--batch-size", "1"),
    "batches-of-500": (*COMPACTED, "--records", "20000", "--keys", "2000", "--tombstones", "0.05"),
    "half-distinct": (*COMPACTED, "--records", "10000", "--keys", "5000", "--batch-size", "100"),
    "lz4": (*COMPACTED, "--records", "10000", "--keys", "1000", "--batch-size", "50", "--compression", "lz4"),
    "consumer-offsets": (
        "--workload", "consumer-offsets", "--partitions", "2", "--segment-bytes", "20000",
        "--commits", "50", "--groups", "40", "--expired-groups", "0.2",
    ),
}  # fmt: skip


def test_held_bytes_add_up_and_retention_now_is_what_a_pass_deletes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log_dir = tmp_path / "logs"
    gen(capsys, log_dir, *COMPACTED, "--records", "4000", "--keys", "400")
    gen(
        capsys,
        log_dir,
        "--topic",
        "old",
        "--records",
        "4000",
        "--segment-bytes",
        "50000",
        "--batch-size",
        "50",
        "--timestamp-start",
        "1000",
    )
    doc = summary(capsys, log_dir)
    reasons = {h["reason"]: h for h in doc["held"]}
    assert set(reasons) == {"cleanable", "time", "active-segment"}
    assert reasons["cleanable"]["partitions"] == 2
    assert doc["partitions"] == 3
    assert doc["reclaimable"]["compaction_estimated"] is True, "offline, without --exact: no sketches"
    assert doc["reclaimable"]["compaction_unestimated_bytes"] > 0
    before = log_bytes(log_dir)
    code, _, err = run(capsys, "retention", "--json", "--override", f"log.dirs={log_dir}")
    assert code == 0, err
    assert doc["reclaimable"]["retention_now"] == before - log_bytes(log_dir) == reasons["time"]["bytes"]


@pytest.mark.parametrize("workload", ["batches-of-10", "consumer-offsets"])
def test_exact_is_what_clean_frees(capsys: pytest.CaptureFixture[str], tmp_path: Path, workload: str) -> None:
    log_dir = tmp_path / "logs"
    gen(capsys, log_dir, *WORKLOADS[workload])
    doc = summary(capsys, log_dir, "--exact")
    assert doc["reclaimable"]["compaction_estimated"] is False
    assert doc["reclaimable"]["compaction"] == freed_by_clean(capsys, log_dir) > 0


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_the_sketch_estimate_is_within_5_percent_of_what_clean_frees(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, workload: str
) -> None:
    log_dir = tmp_path / "logs"
    gen(capsys, log_dir, *WORKLOADS[workload])
    broker = load_config(None, (f"log.dirs={log_dir}",))
    sketches = SegmentSketches()
    estimate = 0
    with read_only_log_manager(broker) as (manager, _copies):
        for part in summary_parts(manager, cleaner_enabled=True):
            log = next(
                (
                    log
                    for tp, log in manager.logs.items()
                    if (tp.topic, tp.partition) == (part.topic, part.partition)
                )
            )
            segments = round_segments(log, part)
            sketches.fill(segments, budget_bytes=1 << 40)
            estimate += sketches.estimate(segments) or 0
    freed = freed_by_clean(capsys, log_dir)
    assert freed > 0
    assert abs(estimate - freed) <= 0.05 * freed, f"estimate {estimate}, clean freed {freed}"


def test_an_unreadable_partition_is_its_own_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log_dir = tmp_path / "logs"
    gen(capsys, log_dir, "--topic", "t", "--partitions", "2", "--records", "100")
    (log_dir / "t-1" / "00000000000000000abc.log").write_bytes(b"")
    doc = summary(capsys, log_dir)
    unreadable = next(h for h in doc["held"] if h["reason"] == "unreadable")
    assert unreadable["partitions"] == 1
    assert unreadable["top"][0]["path"] == str(log_dir / "t-1")
    assert "abc" in unreadable["errors"][0]["error"]
    code, out, _ = run(capsys, "explain", "--summary", "--override", f"log.dirs={log_dir}")
    assert code == 0 and "unreadable" in out


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(capsys, "explain", "--exact", "--override", f"log.dirs={tmp_path}")[0] == 2
    assert run(capsys, "explain", "--summary", "--topic", "t", "--override", f"log.dirs={tmp_path}")[0] == 2


def test_dirs_this_user_cannot_read_are_the_summarys_unreadable_never_a_failed_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A log dir it cannot list, and a log dir taken offline by one partition dir it cannot list: each is
    ``unreadable`` with its error, the second with the bytes its other partitions hold (as ``nobody`` when
    the tests run as root)."""
    with open_folder() as folder:
        locked, partly = folder / "locked", folder / "partly"
        gen(capsys, locked, "--topic", "u", "--records", "100")
        gen(capsys, partly, "--topic", "t", "--partitions", "2", "--records", "100")
        readable_bytes = sum(p.stat().st_size for p in (partly / "t-0").glob("*.log"))
        for path in folder.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        locked.chmod(0)
        (partly / "t-1").chmod(0)
        args = [sys.executable, "-m", "service", "explain", "--summary", "--json"]
        done = subprocess.run(
            as_unprivileged([*args, "--override", f"log.dirs={partly},{locked}"]),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    (unreadable,) = doc["held"]
    assert unreadable["reason"] == "unreadable" and unreadable["bytes"] == readable_bytes > 0
    assert doc["total_bytes"] == readable_bytes
    errors = {e["path"]: e["error"] for e in unreadable["errors"]}
    assert "cannot be read by this user" in errors[str(locked)]
    assert "Permission denied" in errors[str(partly)] and "t-1" in errors[str(partly)]
    assert len(done.stderr.splitlines()) == 1 and "offline" in done.stderr  # one line, naming the cause

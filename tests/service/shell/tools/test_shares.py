"""An inspection split over processes (``shares.py``) prints what one process prints, writes nothing, and
fails as its failing share failed.

The split starts at ``PARTITIONS_PER_PROCESS`` partitions a process; here the process count is forced, so
that a handful of partitions go to three processes (the first share in this one, two forked children).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import service.shell.tools.log_commands as log_commands
from service.base.errors import LogDirOfflineError, NotFoundError
from service.core.reports import explain_partitions
from service.shell.cli import main
from service.shell.tools.shares import PARTITIONS_PER_PROCESS, process_count
from service.storage.partition_metadata import new_topic_id
from tests.service.cli_logs import make_old_logs, snapshot

INSPECTIONS = [
    ["explain", "--json"],
    ["explain", "--json", "--topic", "t"],
    ["explain", "--json", "--topic", "t", "--partition", "3"],
    ["retention", "--dry-run", "--json"],
    ["retention", "--dry-run"],
]


def run(capsys: pytest.CaptureFixture[str], log_dir: Path, *args: str) -> tuple[int, str, str]:
    code = main([*args, "--override", f"log.dirs={log_dir}", "--override", "log.retention.hours=24"])
    out, err = capsys.readouterr()
    return code, out, err


def without_ages(out: str) -> Any:
    """The document without each segment's ``detail``, which states its age at the time of the run."""
    if not out.startswith("{"):
        return out
    document = json.loads(out)
    for partition in document.get("partitions", []):
        for segment in partition["segments"]:
            segment.pop("detail", None)  # a stray replica's segments have none
    return document


@pytest.mark.parametrize("args", INSPECTIONS, ids=lambda a: " ".join(a))
def test_a_split_inspection_prints_what_one_process_prints_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str]
) -> None:
    log_dir = tmp_path / "logs"
    make_old_logs(log_dir, partitions=7)
    first_log = sorted((log_dir / "t-4").glob("*.log"))[0]  # a swap to complete: read from a scratch copy
    (log_dir / "t-4" / (first_log.name + ".swap")).write_bytes(first_log.read_bytes())
    before = snapshot(log_dir)
    code, alone, err = run(capsys, log_dir, *args)
    assert code == 0, err
    monkeypatch.setattr(log_commands, "process_count", lambda _partitions: 3)
    code, split, err = run(capsys, log_dir, *args)
    assert code == 0, err
    assert without_ages(split) == without_ages(alone)
    if args[0] == "retention":
        assert split.count("would delete") >= 7 or len(json.loads(split)["deleted"]) >= 7
    assert snapshot(log_dir) == before


def test_a_stray_is_decided_over_its_topics_dirs_in_every_share(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each share surveys only the topics it has dirs of, but all of their dirs: ``t-6``, alone in the last
    share with another topic id than its six siblings in the others, is still outvoted there."""
    log_dir = tmp_path / "logs"
    make_old_logs(log_dir, partitions=7)
    ids = {p: new_topic_id() if p in (0, 6) else None for p in range(7)}
    for p in range(7):
        topic_id = ids[p] or ids[0]
        (log_dir / f"t-{p}" / "partition.metadata").write_text(f"version: 0\ntopic_id: {topic_id}\n")
    code, alone, err = run(capsys, log_dir, "explain", "--json")
    assert code == 0, err
    monkeypatch.setattr(log_commands, "process_count", lambda _partitions: 7)
    code, split, err = run(capsys, log_dir, "explain", "--json")
    assert code == 0, err
    assert without_ages(split) == without_ages(alone)
    stray = {p["partition"]: p["stray"] for p in json.loads(split)["partitions"]}
    assert stray == {p: p == 6 for p in range(7)}


def test_a_topic_without_partitions_is_exit_2_when_split_too(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    log_dir = tmp_path / "logs"
    make_old_logs(log_dir, partitions=2)
    monkeypatch.setattr(log_commands, "process_count", lambda _partitions: 2)
    code, out, err = run(capsys, log_dir, "explain", "--json", "--topic", "nope")
    assert (code, out) == (2, "")
    assert "no partition matches topic 'nope'" in err


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (NotFoundError("partition t-5 is gone"), 2),
        (LogDirOfflineError("partition t-5 is gone", log_dir="/x"), 1),  # rebuilt there without its keyword
    ],
    ids=["not-found", "keyword-only-error"],
)
def test_an_error_in_a_child_s_share_is_raised_by_the_parent(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    error: Exception,
    code: int,
) -> None:
    log_dir = tmp_path / "logs"
    make_old_logs(log_dir, partitions=6)
    real = explain_partitions

    def failing_in_the_last_share(manager: Any, **kwargs: Any) -> Any:
        if any(tp.partition == 5 for tp in manager.logs):
            raise error
        return real(manager, **kwargs)

    monkeypatch.setattr(log_commands, "explain_partitions", failing_in_the_last_share)
    monkeypatch.setattr(log_commands, "process_count", lambda _partitions: 3)
    exit_code, out, err = run(capsys, log_dir, "explain", "--json")
    assert (exit_code, out) == (code, "")
    assert "partition t-5 is gone" in err


def test_an_unforeseen_error_in_a_child_s_share_propagates_as_itself(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As it would from one process: not mapped to an exit code, a traceback."""
    log_dir = tmp_path / "logs"
    make_old_logs(log_dir, partitions=6)

    def failing_in_the_last_share(manager: Any, **kwargs: Any) -> Any:
        if any(tp.partition == 5 for tp in manager.logs):
            raise RuntimeError("partition t-5 is gone")
        return []

    monkeypatch.setattr(log_commands, "explain_partitions", failing_in_the_last_share)
    monkeypatch.setattr(log_commands, "process_count", lambda _partitions: 3)
    with pytest.raises(RuntimeError, match="partition t-5 is gone"):
        run(capsys, log_dir, "explain", "--json")


def test_a_process_per_cpu_and_at_least_a_share_of_partitions_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    per = PARTITIONS_PER_PROCESS
    assert [process_count(n) for n in (0, per - 1, 2 * per - 1, 2 * per, 3 * per, 100 * per)] == [
        1,
        1,
        1,
        2,
        3,
        4,
    ]

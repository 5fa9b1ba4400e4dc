"""A broker's ``log.dirs`` as Kafka's LogManager treats them: a partition held twice stops every command
that loads the logs with nothing changed; a log dir named through a symbolic link, a relative path or
``..`` works and restarts; only the metadata log's dirs are left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from service.base.errors import InvalidInputError
from service.config.broker_config import BrokerConfig
from service.shell.cli import main
from tests.paths import REPO
from tests.service.broker_layout import METADATA_DIR, RECORDS_PER_PARTITION, make_broker_dirs, snapshot
from tests.service.serve_process import READY, Serve

LOADING_COMMANDS = [
    ["retention", "--json"],
    ["retention", "--dry-run", "--json"],
    ["clean", "--json"],
    ["clean", "--topic", "orders", "--partition", "0", "--json"],
    ["explain", "--json"],
]


def run_cli(capsys: pytest.CaptureFixture[str], log_dirs: list[Path], *args: str) -> tuple[int, str, str]:
    code = main([*args, "--override", f"log.dirs={','.join(map(str, log_dirs))}"])
    out, err = capsys.readouterr()
    return code, out, err


def serve_once(log_dirs: list[Path]) -> subprocess.CompletedProcess[str]:
    """``serve`` that is expected to stop by itself (a refused start-up)."""
    args = [sys.executable, "-m", "service", "serve"]
    args += ["--override", f"log.dirs={','.join(map(str, log_dirs))}", "--override", "api.port=0"]
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("logcleaner: error:")]


@pytest.mark.parametrize("args", LOADING_COMMANDS, ids=" ".join)
def test_a_partition_in_two_log_dirs_stops_each_command_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    log_dirs = make_broker_dirs(tmp_path, {"a": ["orders-0", "orders-1"], "b": ["orders-0", "events-0"]})
    before = snapshot(tmp_path)
    code, out, err = run_cli(capsys, log_dirs, *args)
    assert code == 2 and out == ""
    (line,) = error_lines(err)
    assert "Duplicate log directories for orders-0" in line
    assert str(log_dirs[0] / "orders-0") in line and str(log_dirs[1] / "orders-0") in line
    assert snapshot(tmp_path) == before


def test_serve_refuses_a_partition_in_two_log_dirs_and_changes_nothing(tmp_path: Path) -> None:
    log_dirs = make_broker_dirs(tmp_path, {"a": ["orders-0"], "b": ["events-0", "orders-0"]})
    before = snapshot(tmp_path)
    done = serve_once(log_dirs)
    assert done.returncode == 2, done.stderr
    (line,) = error_lines(done.stderr)
    assert "Duplicate log directories for orders-0" in line
    assert str(log_dirs[0] / "orders-0") in line and str(log_dirs[1] / "orders-0") in line
    assert snapshot(tmp_path) == before  # marker, checkpoints and segments as they were


def test_a_zero_padded_partition_beside_its_plain_name_is_the_same_partition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_dirs = make_broker_dirs(tmp_path, {"a": ["t-7", "t-007"], "b": []})
    for log_dir in log_dirs:
        (log_dir / ".lock").unlink()  # not even a lock file is created
    before = snapshot(tmp_path)
    for args in (["retention", "--json"], ["explain", "--json"]):
        code, _, err = run_cli(capsys, log_dirs, *args)
        assert code == 2
        (line,) = error_lines(err)
        assert "for t-7 " in line and str(log_dirs[0] / "t-007") in line and str(log_dirs[0] / "t-7") in line
    assert snapshot(tmp_path) == before


def test_a_future_replica_beside_its_current_one_is_no_duplicate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    future = "orders-0.0123456789abcdef0123456789abcdef-future"
    log_dirs = make_broker_dirs(tmp_path, {"a": ["orders-0"], "b": []})
    (log_dirs[1] / future).mkdir()
    code, out, _ = run_cli(capsys, log_dirs, "explain", "--json")
    assert code == 0
    assert [(p["topic"], p["partition"]) for p in json.loads(out)["partitions"]] == [("orders", 0)]
    (log_dirs[0] / future).mkdir()  # a second future of the same partition is one too many
    code, _, err = run_cli(capsys, log_dirs, "explain", "--json")
    assert code == 2
    assert f"Duplicate log directories found: {log_dirs[0] / future}, {log_dirs[1] / future}" in err


def test_only_the_metadata_log_is_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log_dirs = make_broker_dirs(tmp_path, {"a": ["__cluster_metadata-x-0", "orders-0"]})
    metadata_before = snapshot(log_dirs[0] / METADATA_DIR)
    code, out, _ = run_cli(capsys, log_dirs, "explain", "--json")
    assert code == 0
    partitions = {(p["topic"], p["partition"]): p for p in json.loads(out)["partitions"]}
    assert sorted(partitions) == [("__cluster_metadata-x", 0), ("orders", 0)]
    assert partitions[("__cluster_metadata-x", 0)]["log_end_offset"] == RECORDS_PER_PARTITION
    code, _, _ = run_cli(capsys, log_dirs, "retention", "--override", "log.retention.ms=1", "--json")
    assert code == 0
    assert snapshot(log_dirs[0] / METADATA_DIR) == metadata_before


def test_the_same_log_dir_named_twice_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (log_dir,) = make_broker_dirs(tmp_path, {"logs": ["orders-0"]})
    (tmp_path / "link").symlink_to(log_dir)
    with pytest.raises(InvalidInputError, match=r"log\.dirs.*Duplicate log directory found.*link"):
        BrokerConfig.from_properties({"log.dirs": f"{log_dir},{tmp_path / 'link'}"})
    before = snapshot(tmp_path)
    for named in ([log_dir, tmp_path / "link"], [log_dir, tmp_path / "logs" / ".." / "logs" / ""]):
        code, _, err = run_cli(capsys, named, "explain", "--json")
        assert code == 2
        (line,) = error_lines(err)
        assert "log.dirs" in line and "Duplicate log directory found" in line and str(log_dir) in line
    assert snapshot(tmp_path) == before


@pytest.mark.slow
def test_log_dirs_through_a_link_a_relative_path_and_dot_dot_restart_cleanly(tmp_path: Path) -> None:
    real = make_broker_dirs(tmp_path / "real", {"a": ["orders-0"], "b": ["orders-1"], "c": ["events-0"]})
    (tmp_path / "link-to-a").symlink_to(real[0])
    (tmp_path / "sub").mkdir()
    named = [
        tmp_path / "link-to-a",
        Path(os.path.relpath(real[1], REPO)),  # serve runs in REPO
        tmp_path / "sub" / ".." / "real" / "c",
    ]
    for _ in range(2):  # the second start finds the clean-shutdown markers the first left
        serve = Serve(real[0], f"log.dirs={','.join(map(str, named))}")
        serve.wait_for(READY)
        assert "3 logs loaded (0 recovered)" in serve.log
        assert serve.stop() == 0, serve.log
    assert all((log_dir / ".kafka_cleanshutdown").exists() for log_dir in real)
    assert (tmp_path / "link-to-a").is_symlink()


def test_gen_refuses_a_duplicate_and_the_metadata_topic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (log_dir,) = make_broker_dirs(tmp_path, {"a": ["t-7", "t-007"]})
    before = snapshot(tmp_path)
    gen = ["gen", "--log-dir", str(log_dir), "--partitions", "8", "--records", "5"]
    assert main([*gen, "--topic", "t"]) == 2
    (line,) = error_lines(capsys.readouterr().err)
    assert "Duplicate log directories for t-7" in line
    assert snapshot(tmp_path) == before
    (log_dir / "t-007").rename(tmp_path / "t-007-moved-away")
    before = snapshot(tmp_path)
    assert main([*gen, "--topic", "__cluster_metadata"]) == 2
    assert "Creation of internal topic __cluster_metadata is prohibited." in capsys.readouterr().err
    assert snapshot(tmp_path) == before

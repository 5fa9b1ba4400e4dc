"""Inspection commands write nothing into a log dir: no lock, marker, checkpoint, index or truncation.

``explain`` and ``retention --dry-run`` run over a log dir after a clean stop, after an unclean one (no
marker, missing indexes, a torn tail that recovery would cut), and while another LogManager holds its
lock; every file's bytes, and the set of names, are the same afterwards. No offline command creates a
missing log dir: that is exit 2 naming it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from service.shell.cli import main
from service.shell.tools.log_commands import load_config, read_only_log_manager
from service.storage.dir_lock import LogDirLock
from service.storage.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    write_leader_epoch_checkpoint,
)
from service.storage.partition_metadata import PARTITION_METADATA_FILE, write_partition_metadata
from service.storage.topic_partition import TopicPartition
from tests.paths import REPO
from tests.service.cli_logs import make_old_logs, snapshot

DAY_MS = 86_400_000
READ_ONLY_COMMANDS = [["explain", "--json"], ["retention", "--dry-run", "--json"]]


def make_unclean(log_dir: Path) -> None:
    """As a kill leaves it: no marker, no recovery-point checkpoint, lost indexes, a torn last batch."""
    (log_dir / ".kafka_cleanshutdown").unlink()
    (log_dir / "recovery-point-offset-checkpoint").unlink(missing_ok=True)
    partition = log_dir / "t-0"
    for index in sorted(partition.glob("*.index"))[:2]:
        index.unlink()
    active = sorted(partition.glob("*.log"))[-1]
    with active.open("ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00")  # a batch header cut short


def run(capsys: pytest.CaptureFixture[str], log_dir: Path, *args: str) -> tuple[int, str, str]:
    code = main([*args, "--override", f"log.dirs={log_dir}", "--override", "log.retention.hours=24"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("args", READ_ONLY_COMMANDS, ids=lambda a: " ".join(a))
@pytest.mark.parametrize("state", ["clean", "unclean", "held-by-a-daemon"])
def test_inspection_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], state: str
) -> None:
    log_dir = tmp_path / "logs"
    make_old_logs(log_dir)
    if state == "unclean":
        make_unclean(log_dir)
    lock = LogDirLock(log_dir) if state == "held-by-a-daemon" else None
    if lock is not None:
        lock.acquire()
    try:
        before = snapshot(log_dir)
        code, out, err = run(capsys, log_dir, *args)
        assert code == 0, err
        assert snapshot(log_dir) == before
    finally:
        if lock is not None:
            lock.release()
    document = json.loads(out)
    if args[0] == "retention":
        assert len(document["deleted"]) >= 4  # it still reports what a real pass would delete
    else:
        assert {p["log_dir"] for p in document["partitions"]} == {str(log_dir.resolve())}
        verdicts = [s["verdict"] for p in document["partitions"] for s in p["segments"]]
        assert verdicts.count("delete") >= 4


def test_inspection_after_an_unclean_stop_reports_what_recovery_would_do(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    clean, unclean = tmp_path / "clean", tmp_path / "unclean"
    make_old_logs(clean)
    make_old_logs(unclean)
    make_unclean(unclean)
    documents = []
    for log_dir in (clean, unclean):
        code, out, err = run(capsys, log_dir, "explain", "--json")
        assert code == 0, err
        documents.append(json.loads(out)["partitions"])
    offsets = [[(p["log_start_offset"], p["log_end_offset"]) for p in doc] for doc in documents]
    assert offsets[0] == offsets[1]  # the torn tail is not counted: recovery would cut it


def test_a_partition_missing_from_the_checkpoint_is_recovered_in_a_copy_only(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """After a clean stop a partition the recovery-point checkpoint does not list (it failed to load last
    time) is recovered whole at load: its sealed segments, torn here, are copied too."""
    log_dir = tmp_path / "logs"
    make_old_logs(log_dir)
    checkpoint = log_dir / "recovery-point-offset-checkpoint"
    lines = checkpoint.read_text().splitlines()
    kept = [line for line in lines[2:] if not line.startswith("t 0 ")]
    checkpoint.write_text("\n".join([lines[0], str(len(kept)), *kept]) + "\n")
    sealed = sorted((log_dir / "t-0").glob("*.log"))[1]
    os.truncate(sealed, sealed.stat().st_size - 3)  # recovery cuts this segment and drops the later ones
    before = snapshot(log_dir)
    code, out, err = run(capsys, log_dir, "explain", "--json")
    assert code == 0, err
    assert snapshot(log_dir) == before
    [t0] = [p for p in json.loads(out)["partitions"] if p["partition"] == 0]
    assert t0["log_end_offset"] < 30


def test_after_a_clean_stop_only_a_partition_whose_load_would_write_is_copied(tmp_path: Path) -> None:
    """A partition holding an interrupted swap (which loading completes) is read from a scratch copy; the
    others in place, with what a load would only delete passed over: files of deleted segments and an
    unfinished cleaning, a stray producer snapshot; and a missing leader-epoch checkpoint not created."""
    log_dir = tmp_path / "logs"
    make_old_logs(log_dir, partitions=3)
    first_log = sorted((log_dir / "t-1").glob("*.log"))[0]
    (log_dir / "t-1" / (first_log.name + ".swap")).write_bytes(first_log.read_bytes())
    for leftover in (".cleaned", ".deleted"):
        (log_dir / "t-0" / ("00000000000000000099.log" + leftover)).write_bytes(first_log.read_bytes())
    (log_dir / "t-2" / "00000000000000000005.snapshot").write_bytes(
        next((log_dir / "t-2").glob("*.snapshot")).read_bytes()
    )
    (log_dir / "t-2" / "leader-epoch-checkpoint").unlink()
    before = snapshot(log_dir)
    broker = load_config(None, (f"log.dirs={log_dir}",))
    with read_only_log_manager(broker) as (manager, copies):
        assert copies.copied == 1
        logs = manager.logs
        assert [tp.partition for tp in logs] == [0, 1, 2]
        assert copies.original_log_dir(logs[TopicPartition("t", 1)].directory.parent) == log_dir.resolve()
        assert logs[TopicPartition("t", 0)].directory == log_dir.resolve() / "t-0"  # in place
        assert {log.log_end_offset for log in logs.values()} == {30}
    assert snapshot(log_dir) == before


def test_a_read_only_load_defers_the_files_the_daemon_defers_and_their_reads_write_nothing(
    tmp_path: Path,
) -> None:
    """As at the daemon's clean start, the leader-epoch checkpoint and the producer snapshot at the log end
    offset are read at their first use, not at load (``retention --dry-run`` needs neither); reading them
    then writes nothing either: a corrupt snapshot stays (the state is rebuilt from the segments), and
    epochs past the log end are cut in memory only. ``partition.metadata`` is read once, by the start-up's
    stray-replica survey, and the log keeps the id that survey judged it by."""
    log_dir = tmp_path / "logs"
    make_old_logs(log_dir, partitions=2)
    t0, t1 = log_dir / "t-0", log_dir / "t-1"
    write_leader_epoch_checkpoint(t0, [EpochEntry(0, 0), EpochEntry(7, 500)])  # 500: past the end (30)
    assert (t1 / "00000000000000000030.snapshot").exists()  # the clean close's, at the log end offset
    (t1 / "00000000000000000030.snapshot").write_bytes(b"not a snapshot")
    write_partition_metadata(t0, "BBBBBBBBBBBBBBBBBBBBBB")
    broker = load_config(None, (f"log.dirs={log_dir}",))
    with read_only_log_manager(broker) as (manager, copies):
        assert copies.copied == 0
        logs = [manager.logs[TopicPartition("t", p)] for p in (0, 1)]
        write_partition_metadata(t0, "AAAAAAAAAAAAAAAAAAAAAA")
        before = snapshot(log_dir)
        assert logs[0].topic_id == "BBBBBBBBBBBBBBBBBBBBBB", "the id the survey read at start-up"
        assert logs[1].topic_id is None
        assert not (t1 / PARTITION_METADATA_FILE).exists()
        assert logs[0].leader_epochs.entries == [EpochEntry(0, 0)]
        assert logs[1].producer_state.snapshot_entries() == []  # rebuilt from the segments
        assert logs[1].last_stable_offset == 30
        assert snapshot(log_dir) == before
    assert snapshot(log_dir) == before
    assert (t0 / LEADER_EPOCH_CHECKPOINT).read_bytes().count(b"\n") == 4  # both entries kept on disk


def test_a_clean_dir_is_read_in_place(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    make_old_logs(log_dir, partitions=3)
    broker = load_config(None, (f"log.dirs={log_dir}",))
    with read_only_log_manager(broker) as (manager, copies):
        assert len(manager.logs) == 3
        assert copies.copied == 0


@pytest.mark.parametrize(
    "args",
    [*READ_ONLY_COMMANDS, ["retention"], ["clean"], ["topic-config", "--topic", "t"]],
    ids=lambda a: " ".join(a),
)
def test_a_missing_log_dir_is_exit_2_and_is_not_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str]
) -> None:
    missing = tmp_path / "typo" / "logs"
    code, _out, err = run(capsys, missing, *args)
    assert code == 2
    assert str(missing) in err and "does not exist" in err
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("command", [["explain"], ["retention", "--dry-run"]])
def test_a_warning_of_a_read_only_load_names_the_operators_file_and_says_nothing_changed(
    tmp_path: Path, command: list[str]
) -> None:
    """The torn tail is cut in a scratch copy: its warning names the original file, not the copy."""
    log_dir = tmp_path / "logs"
    make_old_logs(log_dir)
    make_unclean(log_dir)
    args = [sys.executable, "-m", "service", *command, "--override", f"log.dirs={log_dir}"]
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    assert warnings and all("logcleaner-read-only-" not in line for line in warnings), warnings
    torn = [line for line in warnings if "truncating" in line]
    assert torn and str(log_dir.resolve() / "t-0") in torn[0], torn
    assert torn[0].endswith("(in a read-only copy: nothing in the log dir was changed)"), torn


FROZEN_PROBE = """
import gc, sys
from pathlib import Path
from service.shell.tools.log_commands import inspect_logs, load_config

broker = load_config(None, (f"log.dirs={sys.argv[1]}",))
answer = inspect_logs(broker, lambda manager, copies: [list(manager.logs.values())], shares=False)
tracked = {id(o) for o in gc.get_objects()}  # the collector's generations: frozen objects are not in them
print(gc.isenabled(), len(answer[0]), id(answer) in tracked, any(id(log) in tracked for log in answer[0]))
"""


def test_an_inspection_freezes_what_it_leaves_alive_and_collects_again_after(tmp_path: Path) -> None:
    """The logs and the answer are out of the collector's view once the inspection returns: the first
    collection after it does not walk a broker's worth of logs."""
    make_old_logs(tmp_path / "logs", partitions=3)
    probe = subprocess.run(
        [sys.executable, "-c", FROZEN_PROBE, str(tmp_path / "logs")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["True", "3", "False", "False"]

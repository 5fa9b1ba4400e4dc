"""Logs of a log dir that logcleaner does not manage (a broker's ``-future`` and stray replicas) keep what
Kafka keeps for them: their checkpoint entries (Kafka checkpoints its future logs), and the recovery the
broker owes them after an unclean stop, which the clean-shutdown marker must not waive. The marker's broker
epoch (KIP-966; Kafka reads it back at start-up) is written back as it was read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from service.shell.cli import main
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.clean_shutdown import (
    read_clean_shutdown_marker,
    remove_clean_shutdown_marker,
    write_clean_shutdown_marker,
)
from service.storage.log_files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)
from service.storage.topic_partition import TopicPartition
from tests.api.conftest import serve_daemon

FUTURE_DIR = "t-0.5a4b3c2d1e0f49382716a5b4c3d2e1f0-future"
T0 = TopicPartition("t", 0)
# What the broker checkpointed for its future replica of t-0 (any values: they must come back unchanged).
FUTURE_ENTRIES = {RECOVERY_POINT_CHECKPOINT: 17, LOG_START_OFFSET_CHECKPOINT: 5, CLEANER_OFFSET_CHECKPOINT: 9}


def gen(log_dir: Path, topic: str, *extra: str) -> None:
    args = ["gen", "--log-dir", str(log_dir), "--topic", topic, "--records", "40", "--batch-size", "5"]
    assert main([*args, "--value-size", "10", "--segment-bytes", "400", "--keys", "4", *extra]) == 0


def broker_dirs(tmp_path: Path) -> tuple[Path, Path]:
    """``a`` holds t-0; ``b`` holds the broker's future replica of t-0 (moving to ``b``, KIP-113) beside a
    topic ``c``, and checkpoint entries for the future replica."""
    a, b = tmp_path / "a", tmp_path / "b"
    gen(a, "t", "--timestamp-start", "1000000")
    gen(b, "c")
    shutil.copytree(a / "t-0", b / FUTURE_DIR)
    for name, offset in FUTURE_ENTRIES.items():
        checkpoint = OffsetCheckpointFile(b / name)
        checkpoint.write({**checkpoint.read(), T0: offset})
    return a, b


def future_entries(log_dir: Path) -> dict[str, int | None]:
    return {name: OffsetCheckpointFile(log_dir / name).read().get(T0) for name in FUTURE_ENTRIES}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_checkpoint_rewrite_keeps_a_future_replicas_entries(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = broker_dirs(tmp_path)
    dirs = ["--override", f"log.dirs={a},{b}", "--override", "log.segment.delete.delay.ms=0"]
    code, out, err = run(capsys, "retention", *dirs, "--json")
    assert code == 0, err
    # Neither a's t-0 nor b's future replica: t-0 is being moved, paused as Kafka pauses it.
    assert json.loads(out)["deleted"] == []
    compact = ["--override", "log.cleanup.policy=compact", "--topic", "c", "--partition", "0"]
    code, out, err = run(capsys, "clean", *dirs, *compact, "--json")
    assert code == 0, err
    assert [c["topic"] for c in json.loads(out)["cleaned"]] == ["c"]
    assert TopicPartition("c", 0) in OffsetCheckpointFile(b / CLEANER_OFFSET_CHECKPOINT).read()
    assert future_entries(b) == FUTURE_ENTRIES
    assert future_entries(a)[RECOVERY_POINT_CHECKPOINT] == 40, "a's t-0 entry is its own"
    gen(b, "g")  # gen loads and closes the whole dir too
    assert future_entries(b) == FUTURE_ENTRIES

    with serve_daemon(b, {"log.dirs": f"{a},{b}"}) as served:
        served.daemon.log_manager.checkpoint_recovery_points()
        served.daemon.log_manager.checkpoint_log_start_offsets()
        response = served.client.delete("/v1/topics/c")  # drops c's entries, the future's stay
        assert response.status_code == 202, response.text
    assert future_entries(b) == FUTURE_ENTRIES
    assert TopicPartition("c", 0) not in OffsetCheckpointFile(b / RECOVERY_POINT_CHECKPOINT).read()


def test_no_marker_over_logs_left_unrecovered(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """After an unclean stop, a dir holding a future replica with a torn tail, or a partition that failed to
    load, gets no marker: the broker's next start must recover it. A dir that came up clean, or whose every
    log was recovered, gets one."""
    a, b = broker_dirs(tmp_path)
    remove_clean_shutdown_marker(a)
    remove_clean_shutdown_marker(b)
    torn = b / FUTURE_DIR / f"{30:020d}.log"
    torn_bytes = torn.read_bytes() + b"\x00\x00\x00\x00\x00\x00\x00\x28\x00\x00"  # half a batch header
    torn.write_bytes(torn_bytes)
    dirs = ["--override", f"log.dirs={a},{b}"]

    code, _, err = run(capsys, "retention", *dirs, "--dry-run")
    assert code == 0, err
    code, _, err = run(capsys, "retention", *dirs)
    assert code == 0, err
    assert (a / CLEAN_SHUTDOWN_FILE).exists(), "every log of a was recovered"
    assert not (b / CLEAN_SHUTDOWN_FILE).exists(), "b's future replica is not recovered"
    assert torn.read_bytes() == torn_bytes, "the broker's log is left for the broker to recover"

    with serve_daemon(b, {"log.dirs": f"{a},{b}"}):
        pass
    assert read_clean_shutdown_marker(a) is not None and not (b / CLEAN_SHUTDOWN_FILE).exists()

    remove_clean_shutdown_marker(a)  # an unclean stop again, and a partition of a fails to load
    (a / "t-0" / "00000000000000000abc.log").write_bytes(b"")
    code, _, err = run(capsys, "retention", *dirs)
    assert code == 0, err
    assert not (a / CLEAN_SHUTDOWN_FILE).exists(), "a's t-0 failed to load: not recovered"
    (a / "t-0" / "00000000000000000abc.log").unlink()

    write_clean_shutdown_marker(b)  # the broker recovered it and stopped cleanly
    code, _, err = run(capsys, "retention", *dirs)
    assert code == 0, err
    assert (b / CLEAN_SHUTDOWN_FILE).exists(), "a dir that came up clean is clean again"


def test_the_markers_broker_epoch_is_written_back(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a, b = broker_dirs(tmp_path)
    write_clean_shutdown_marker(a, 42)
    (b / CLEAN_SHUTDOWN_FILE).write_text('{"version":"0","broker_epoch":"7"}')  # Kafka 3.7's form
    code, _, err = run(capsys, "retention", "--override", f"log.dirs={a},{b}")
    assert code == 0, err
    assert (a / CLEAN_SHUTDOWN_FILE).read_bytes() == b'{"version":0,"brokerEpoch":42}'
    assert (b / CLEAN_SHUTDOWN_FILE).read_bytes() == b'{"version":0,"brokerEpoch":7}'
    with serve_daemon(a, {"log.dirs": f"{a},{b}"}):
        assert not (a / CLEAN_SHUTDOWN_FILE).exists()
    assert read_clean_shutdown_marker(a) == 42 and read_clean_shutdown_marker(b) == 7


def test_gen_leaves_stray_replicas_and_their_marker_duty_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """gen into a broker's dir after an unclean stop: a stray replica is not loaded (not recovered), so the
    dir gets no marker; gen refuses to append to it."""
    log_dir = tmp_path / "logs"
    gen(log_dir, "t", "--partitions", "3")
    stray = log_dir / "t-1"
    (stray / "partition.metadata").unlink()
    (stray / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")
    remove_clean_shutdown_marker(log_dir)
    stray_bytes = {p.name: p.read_bytes() for p in stray.iterdir()}
    gen(log_dir, "other")
    assert {p.name: p.read_bytes() for p in stray.iterdir()} == stray_bytes
    assert not (log_dir / CLEAN_SHUTDOWN_FILE).exists()
    capsys.readouterr()
    args = ["gen", "--log-dir", str(log_dir), "--topic", "t", "--partitions", "3", "--records", "1"]
    assert main(args) == 2
    assert "t-1 is a stray replica" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in stray.iterdir()} == stray_bytes


def test_a_partition_being_moved_is_not_cleaned_even_when_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """t-0's future replica is in b: the live t-0 in a is paused (Kafka's abortAndPauseCleaning), so even a
    forced round is refused, saying why, and b's lines for the future replica stay as they are."""
    a, b = broker_dirs(tmp_path)
    compact = ["--override", "log.cleanup.policy=compact", "--topic", "t", "--partition", "0"]
    code, _, err = run(capsys, "clean", "--override", f"log.dirs={a},{b}", *compact, "--json")
    assert code == 2
    assert "cannot clean t-0: it is paused (future-replica" in err, err
    assert T0 not in OffsetCheckpointFile(a / CLEANER_OFFSET_CHECKPOINT).read()
    assert future_entries(b) == FUTURE_ENTRIES


def test_explain_reads_a_partitions_cleaner_checkpoint_in_its_own_dir(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """b's cleaner-offset-checkpoint holds the future replica's entry for t-0 (9); a's holds the live log's
    (20): the live log is explained from a's."""
    a, b = broker_dirs(tmp_path)
    OffsetCheckpointFile(a / CLEANER_OFFSET_CHECKPOINT).write({T0: 20})
    dirs = ["--override", f"log.dirs={a},{b}", "--override", "log.cleanup.policy=compact"]
    code, out, err = run(capsys, "explain", *dirs, "--topic", "t", "--json")
    assert code == 0, err
    [doc] = json.loads(out)["partitions"]
    assert doc["log_dir"] == str(a)
    assert doc["cleaner"]["first_dirty_offset"] == 20

"""``logcleaner clean`` and ``retention`` stopped by SIGINT or SIGTERM: one stderr line naming the partition
and how far it got, exit 130 or 143, the logs consistent and closed cleanly; a re-run completes the work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service.base.clock import SystemClock
from service.config.topic_store import TOPIC_CONFIGS_FILE
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.clean_shutdown import read_clean_shutdown_marker
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.paths import REPO

TP = TopicPartition("gen-0", 0)
COMPACT = ("--override", "log.cleanup.policy=compact", "--override", "log.cleaner.engine=in-process")
SLOW = ("--override", "log.cleaner.io.max.bytes.per.second=100000")  # ~10 s for the whole round


def logcleaner(*args: str) -> list[str]:
    return [sys.executable, "-m", "service", *args]


def records_of(log_dir: Path) -> list[tuple[bytes | None, bytes | None]]:
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(), clock=SystemClock())
    try:
        return [(r.key, r.value) for r in loaded.logs[TP].read(0, max_records=1_000_000)]
    finally:
        close_log_dir(loaded)


def latest_per_key(records: list[tuple[bytes | None, bytes | None]]) -> dict[bytes | None, bytes | None]:
    return dict(records)  # in offset order: the last value of each key wins


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_mid_clean_stops_safely_and_a_rerun_completes(
    tmp_path: Path, signum: int, code: int
) -> None:
    generated = subprocess.run(
        logcleaner(
            "gen", "--log-dir", str(tmp_path), "--records", "4000", "--keys", "100", "--value-size", "100",
            "--tombstones", "0", "--batch-size", "20", "--segment-bytes", "16384",
        ),
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    before = records_of(tmp_path)
    partition = tmp_path / str(TP)
    clean = logcleaner("clean", "--override", f"log.dirs={tmp_path}", *COMPACT, *SLOW)
    proc = subprocess.Popen(clean, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(partition.glob("*.log.deleted")):  # the first group is swapped in: mid-round
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    [line] = err.splitlines()
    name = signal.Signals(signum).name
    assert line.startswith(f"logcleaner: interrupted by {name} while cleaning gen-0-0 (")
    assert "already replaced by cleaned ones), 0 partitions cleaned before it; nothing is lost" in line
    assert line.endswith("run clean again to complete it")
    assert out == ""
    leftovers = [p.name for p in partition.iterdir() if p.suffix in (".deleted", ".cleaned", ".swap")]
    assert leftovers == [], "the swaps completed, the rest removed before the exit"
    assert read_clean_shutdown_marker(tmp_path) is not None, "closed as a clean shutdown"
    assert TP not in OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint").read(), "not advanced"
    interrupted = records_of(tmp_path)
    assert latest_per_key(interrupted) == latest_per_key(before), "nothing lost"
    assert len(before) > len(interrupted), "some groups were cleaned"

    rerun = subprocess.run(
        logcleaner("clean", "--override", f"log.dirs={tmp_path}", *COMPACT),
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.startswith("cleaned gen-0-0 [0, ") and rerun.stdout.endswith("1 partition cleaned\n")
    after = records_of(tmp_path)
    assert latest_per_key(after) == latest_per_key(before)
    end_offset = OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint").read()[TP]
    loaded = load_log_dir(tmp_path, lambda _t: LogConfig(), clock=SystemClock())
    try:
        cleaned_keys = [
            r.key for r in loaded.logs[TP].read(0, max_records=1_000_000) if r.offset < end_offset
        ]
    finally:
        close_log_dir(loaded)
    assert len(cleaned_keys) == len(set(cleaned_keys)) == 100, "each key once in the cleaned section"


def write_expired_partitions(log_dir: Path, count: int) -> None:
    """``old-0`` … ``old-<count-1>``: 20 records 8 days old each, in 300-byte segments."""
    for partition in range(count):
        (log_dir / f"old-{partition}").mkdir(parents=True)
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=300), clock=SystemClock())
    stamp = SystemClock().now_ms() - 8 * 86_400_000
    for log in loaded.logs.values():
        for i in range(20):
            log.append_records([Record(0, stamp, b"k%d" % i, b"v%d" % i)])
    close_log_dir(loaded)


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_retention_stops_before_the_next_partition(
    tmp_path: Path, signum: int, code: int
) -> None:
    """The signal comes while the command reads the topic configs (a FIFO here, so it waits there for the
    test): after its handlers are installed and before the pass, at a point the test controls."""
    write_expired_partitions(tmp_path, 3)
    configs = tmp_path / TOPIC_CONFIGS_FILE
    os.mkfifo(configs)
    retention = logcleaner("retention", "--override", f"log.dirs={tmp_path}")
    proc = subprocess.Popen(retention, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with open(configs, "w", encoding="utf-8") as fifo:  # returns once the command opened it to read
            proc.send_signal(signum)
            time.sleep(0.2)  # the handler runs while the read waits
            fifo.write(json.dumps({"version": 0, "topics": {}}))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code, err
    name = signal.Signals(signum).name
    assert err.splitlines() == [
        f"logcleaner: interrupted by {name} before old-0 (0 of 3 partitions done), 0 segments deleted; "
        "nothing is lost (each partition's deletions are complete, the rest untouched): run retention again "
        "to finish the pass"
    ]
    assert out == "0 segments deleted\n"
    assert read_clean_shutdown_marker(tmp_path) is not None, "closed as a clean shutdown"
    configs.unlink()
    rerun = subprocess.run(retention, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    for partition in range(3):
        assert len(list((tmp_path / f"old-{partition}").glob("*.log"))) == 1, "every expired segment deleted"

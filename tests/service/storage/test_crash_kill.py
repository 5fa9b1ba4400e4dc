"""Crash safety: SIGKILL a writer at random moments (50 runs) and check every restart.

After each kill the log must load (with recovery, as after an unclean shutdown), hold every acknowledged
record with the right content, and have indexes that point at real batch boundaries.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service.base.clock import SystemClock
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.records import decode_batch
from tests.paths import REPO
from tests.service.storage.crash_writer import CONFIG, record_for

RUNS = 50


def run_writer_until_killed(directory: Path, seed: int, delay_s: float) -> int:
    """Start the writer, kill it with SIGKILL after ``delay_s``; return the last acknowledged offset."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.service.storage.crash_writer", str(directory), str(seed)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    time.sleep(delay_s)
    proc.send_signal(signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, stderr.decode()
    acked = [int(line) for line in stdout.decode().split("\n")[:-1]]  # the last line may be cut short
    return acked[-1] if acked else -1


def check_indexes(log: PartitionLog) -> None:
    for segment in log.segments:
        segment.sanity_check()
        with open(segment.log_path, "rb") as f:
            data = f.read()
        for n in range(segment.offset_index.entries):
            offset, position = segment.offset_index.entry(n)
            batch = decode_batch(data, position)
            assert batch.last_offset == offset, f"{segment.offset_index.path} entry {n}"
        for n in range(segment.time_index.entries):
            timestamp, offset = segment.time_index.entry(n)
            assert segment.base_offset <= offset < log.log_end_offset
            assert timestamp <= segment.max_timestamp_so_far


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path: Path) -> None:
    directory = tmp_path / "crash-0"
    directory.mkdir()
    rng = random.Random(20261122)
    acknowledged = -1
    verified = 0  # records below this offset were checked by an earlier run
    for run in range(RUNS):
        acknowledged = max(acknowledged, run_writer_until_killed(directory, run, rng.uniform(0.25, 0.5)))
        log = load_partition_log(directory, CONFIG, clock=SystemClock()).log
        assert log.log_end_offset > acknowledged, f"run {run}: acknowledged offset {acknowledged} lost"
        # Every tenth run (and the last) re-reads the whole log; the others read what is new.
        start = 0 if run % 10 == 9 or run == RUNS - 1 else verified
        records = log.read(start, max_records=log.log_end_offset)
        assert [r.offset for r in records] == list(range(start, log.log_end_offset)), f"run {run}: offsets"
        for record in records:
            assert record == record_for(record.offset, 1_000 + record.offset), f"run {run}"
        check_indexes(log)
        verified = log.log_end_offset
        log.close()
    assert acknowledged > 1000, "the writer should have made real progress"

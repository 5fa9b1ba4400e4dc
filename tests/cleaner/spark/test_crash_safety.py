"""SIGKILL a process running a Spark cleaning round at each step of the swap protocol, then reload the log
with the storage loader: nothing is lost. Before any ``.swap`` exists the log is the original; from the
first ``.swap`` on the loader completes the swap and the log is the oracle's (one group); killed between
two groups, the first is cleaned and the rest is as it was (every key keeps its latest value)."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

from cleaner.compaction.oracle import clean_in_process, log_contents
from service.base.clock import ManualClock
from service.storage.loader import load_partition_log
from tests.cleaner.helpers import compact_config, keys, recover_and_check
from tests.cleaner.spark.fixed_logs import SEGMENT_BYTES, write_mixed_log
from tests.cleaner.spark.random_logs import START_MS
from tests.cleaner.spark.round_process import run_round_process

NOW_MS = START_MS + 60_000
ONE_GROUP_BYTES = 1 << 20  # every segment below the upper bound fits one group


def kill_round(tmp_path: Path, segment_bytes: int, kill_at: tuple[str, int]) -> tuple[Path, int]:
    """A fresh copy of the mixed log and a round on it killed at ``kill_at``; the dir and upper bound."""
    write_mixed_log(tmp_path / "original-0")
    directory = tmp_path / "victim-0"
    shutil.copytree(tmp_path / "original-0", directory)
    config = compact_config(segment_bytes=segment_bytes)
    log = load_partition_log(directory, config, clock=ManualClock(NOW_MS)).log
    upper = log.active_segment.base_offset
    log.close()
    spec = {
        "directory": str(directory),
        "segment_bytes": segment_bytes,
        "first_dirty": 0,
        "upper": upper,
        "now_ms": NOW_MS,
        "master": "local[1]",
        "kill_at": list(kill_at),
    }
    done = run_round_process(spec, tmp_path / "scratch")
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    return directory, upper


def cleaned_keys(tmp_path: Path, segment_bytes: int, upper: int) -> list[int]:
    shutil.copytree(tmp_path / "original-0", tmp_path / "oracle-0")
    config = compact_config(segment_bytes=segment_bytes)
    oracle = load_partition_log(tmp_path / "oracle-0", config, clock=ManualClock(NOW_MS)).log
    clean_in_process(oracle, 0, upper, NOW_MS)
    return keys(oracle)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("step", "is_swapped"), [("cleaned", False), ("swap", True), ("deleted", True), ("swapped", True)]
)
def test_a_kill_at_each_step_of_a_one_group_round(tmp_path: Path, step: str, is_swapped: bool) -> None:
    directory, upper = kill_round(tmp_path, ONE_GROUP_BYTES, (step, 1))
    config = compact_config(segment_bytes=ONE_GROUP_BYTES)
    original = keys(load_partition_log(tmp_path / "original-0", config, clock=ManualClock(NOW_MS)).log)
    expected = cleaned_keys(tmp_path, ONE_GROUP_BYTES, upper) if is_swapped else original
    assert expected != original or not is_swapped, "the round changes the log"
    recover_and_check(directory, config, ManualClock(NOW_MS), expected)


@pytest.mark.slow
def test_a_kill_between_groups_leaves_the_first_groups_cleaned_and_the_rest_as_it_was(tmp_path: Path) -> None:
    directory, upper = kill_round(tmp_path, SEGMENT_BYTES, ("swap", 3))
    config = compact_config(segment_bytes=SEGMENT_BYTES)
    original = log_contents(
        load_partition_log(tmp_path / "original-0", config, clock=ManualClock(NOW_MS)).log
    )
    shutil.copytree(tmp_path / "original-0", tmp_path / "oracle-0")
    oracle_log = load_partition_log(tmp_path / "oracle-0", config, clock=ManualClock(NOW_MS)).log
    clean_in_process(oracle_log, 0, upper, NOW_MS)
    cleaned = log_contents(oracle_log)
    group_bases = [s.base_offset for s in oracle_log.segments]  # one segment per group, then the rest
    reloaded_log = load_partition_log(directory, config, clock=ManualClock(NOW_MS)).log
    reloaded = log_contents(reloaded_log)
    assert not [p for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    mixes = [
        [b for b in cleaned if b.base_offset < bound] + [b for b in original if b.base_offset >= bound]
        for bound in group_bases[1:]
    ]
    assert reloaded in mixes[1:], "some groups (not all, not only the first) cleaned, the rest untouched"
    assert reloaded not in (original, cleaned)

"""SIGKILL an in-process round while a group's fsync and swap run on their own thread beside the next
group's cleaning (``cleaner/compaction/group_swap.py``), then reload the log with the storage loader: it
restarts cleanly with no ``.cleaned``, ``.swap`` or ``.deleted`` file left, and holds the first k groups
cleaned and the rest as they were, for the k the kill allows (a group is committed once its ``.swap``
rename is done; a group only synced is not)."""

from __future__ import annotations

import errno
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cleaner.compaction.group_swap import SwapThread
from cleaner.compaction.oracle import BatchView, clean_in_process, log_contents
from service.base.clock import ManualClock
from service.storage.loader import load_partition_log
from service.storage.segment import LogSegment
from tests.cleaner.helpers import compact_config
from tests.cleaner.round_process import run_round_process
from tests.cleaner.spark.fixed_logs import SEGMENT_BYTES, write_mixed_log
from tests.cleaner.spark.random_logs import START_MS

NOW_MS = START_MS + 60_000


def contents(directory: Path) -> list[BatchView]:
    config = compact_config(segment_bytes=SEGMENT_BYTES)
    return log_contents(load_partition_log(directory, config, clock=ManualClock(NOW_MS)).log)


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("original") / "mixed-0"
    write_mixed_log(directory)
    return directory


@pytest.fixture(scope="module")
def mixes(original: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, list[list[BatchView]]]:
    """The upper bound, and per k = 0 … groups the log with its first k groups cleaned, the rest original."""
    directory = tmp_path_factory.mktemp("oracle") / "mixed-0"
    shutil.copytree(original, directory)
    config = compact_config(segment_bytes=SEGMENT_BYTES)
    log = load_partition_log(directory, config, clock=ManualClock(NOW_MS)).log
    upper = log.active_segment.base_offset
    before = log_contents(log)
    clean_in_process(log, 0, upper, NOW_MS)
    after = log_contents(log)
    bounds = [*[s.base_offset for s in log.segments if s.base_offset < upper][1:], upper]
    log.close()
    groups = [
        [b for b in after if b.base_offset < bound] + [b for b in before if b.base_offset >= bound]
        for bound in bounds
    ]
    return upper, [before, *groups]


def kill_round(original: Path, tmp_path: Path, upper: int, kill_at: tuple[str, int]) -> Path:
    directory = tmp_path / "victim-0"
    shutil.copytree(original, directory)
    spec = {
        "directory": str(directory),
        "segment_bytes": SEGMENT_BYTES,
        "upper": upper,
        "now_ms": NOW_MS,
        "kill_at": list(kill_at),
    }
    done = run_round_process(spec)
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    return directory


def test_the_mixed_log_makes_several_groups(mixes: tuple[int, list[list[BatchView]]]) -> None:
    _upper, logs = mixes
    assert len(logs) >= 4, "at least three groups"
    assert len({repr(log) for log in logs}) == len(logs), "each group's cleaning changes the log"


@pytest.mark.parametrize(
    ("kill_at", "committed"),
    [
        (("handed", 1), (0, 1)),  # group 1's swap thread anywhere from its start to its end
        (("handed", 2), (1, 2)),  # group 1 swapped (the round waited for it), group 2's anywhere
        (("synced", 1), (0,)),
        (("synced", 2), (1,)),
        (("swap", 2), (2,)),
        (("deleted", 2), (2,)),
        (("renamed", 2), (2,)),
    ],
)
def test_a_kill_leaves_a_log_that_restarts_with_the_swapped_groups_cleaned(
    original: Path,
    mixes: tuple[int, list[list[BatchView]]],
    tmp_path: Path,
    kill_at: tuple[str, int],
    committed: tuple[int, ...],
) -> None:
    upper, logs = mixes
    directory = kill_round(original, tmp_path, upper, kill_at)
    reloaded = contents(directory)
    assert not [p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    assert reloaded in [logs[k] for k in committed]


def test_a_failed_fsync_fails_the_round_keeps_the_groups_swapped_before_and_deletes_its_files(
    original: Path, mixes: tuple[int, list[list[BatchView]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upper, logs = mixes
    directory = tmp_path / "victim-0"
    shutil.copytree(original, directory)
    flush = LogSegment.flush
    synced: list[int] = []

    def flush_failing_the_second_cleaned(self: LogSegment) -> None:
        if self.log_path.name.endswith(".cleaned"):
            synced.append(self.base_offset)
            if len(synced) == 2:
                raise OSError(errno.EIO, "injected fsync failure", str(self.log_path))
        flush(self)

    monkeypatch.setattr(LogSegment, "flush", flush_failing_the_second_cleaned)
    config = compact_config(segment_bytes=SEGMENT_BYTES)
    log = load_partition_log(directory, config, clock=ManualClock(NOW_MS)).log
    with pytest.raises(OSError, match="injected"):
        clean_in_process(log, 0, upper, NOW_MS)
    assert log_contents(log) == logs[1]
    log.close()
    monkeypatch.undo()
    assert not [p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert contents(directory) == logs[1]


def test_a_rounds_swaps_run_in_order_on_one_thread_which_close_waits_for() -> None:
    """``SwapThread``: one thread per round, not one per group; the jobs run in the order handed over, and
    ``close`` returns once every one has run (a round returns only after its last swap)."""
    ran: list[tuple[int, int]] = []

    def job(n: int) -> Callable[[], None]:
        def run() -> None:
            time.sleep(0.01 if n == 0 else 0)  # the first is slow: the others still wait their turn
            ran.append((n, threading.get_ident()))

        return run

    before = threading.active_count()
    with SwapThread("swap-test") as swaps:
        for n in range(5):
            swaps.submit(job(n))
        assert threading.active_count() == before + 1
    assert [n for n, _ in ran] == [0, 1, 2, 3, 4]
    assert len({ident for _, ident in ran}) == 1 and ran[0][1] != threading.get_ident()
    assert threading.active_count() == before

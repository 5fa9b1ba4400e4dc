"""One in-process round in its own process, its key map bounded or not: its peak RSS, or a kill mid-spill.

    python -m tests.cleaner.bounded_round_process '<json>'

JSON: ``directory``, ``segment_bytes`` (the config the round loads the log with), ``first_dirty``,
``share_bytes`` (the thread's share of the dedupe buffer; null: unbounded), ``spill_dir`` (null: the
partition's dir) and ``kill_in_spill`` (SIGKILL the process once the map has spilled, before its classes are
replayed). Prints ``{"end_offset", "rss_before_kib", "rss_peak_kib"}`` as JSON when it was not killed: the
peak is the process's (``VmHWM``), the before its RSS once the log is loaded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cleaner.compaction.offset_map
from cleaner.compaction.cleaner import Cleaner
from cleaner.compaction.key_map_budget import KeyMapBudget
from cleaner.native import NativeKeyMap, is_spilling
from service.base.clock import ManualClock
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig
from tests.paths import REPO

NOW_MS = 1_400_000_000_000


def _current_rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _peak_rss_kib() -> int:
    """``VmHWM``: this process image's peak (``ru_maxrss`` keeps the forking parent's across ``exec``)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def _kill_before_replay() -> None:
    """SIGKILL at the round's ``finish_spill`` of a spilled map: its classes written, none replayed."""
    module = cleaner.compaction.offset_map
    finish: Callable[[NativeKeyMap, int], int] = getattr(module, "finish_spill")  # noqa: B009 (not an export)

    def killed(key_map: NativeKeyMap, first_offset: int) -> int:
        if is_spilling(key_map):
            os.kill(os.getpid(), signal.SIGKILL)
        return finish(key_map, first_offset)

    setattr(module, "finish_spill", killed)  # noqa: B010 (not an export of the module)


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    if spec.get("kill_in_spill"):
        _kill_before_replay()
    clock = ManualClock(NOW_MS)
    config = LogConfig(segment_bytes=int(spec["segment_bytes"]), cleanup_policy=frozenset({"compact"}))
    log = load_partition_log(Path(spec["directory"]), config, clock=clock).log
    share = spec.get("share_bytes")
    spill_dir = spec.get("spill_dir")
    budget = None if share is None else KeyMapBudget(int(share), Path(spill_dir) if spill_dir else None)

    def delete_now(_delay_ms: int, delete: Callable[[], None]) -> None:
        delete()

    rss_before = _current_rss_kib()
    result = Cleaner(clock=clock, schedule_delete=delete_now, key_map_budget=budget).clean(
        log, int(spec["first_dirty"]), log.active_segment.base_offset
    )
    log.close()
    out = {
        "end_offset": result.end_offset,
        "rss_before_kib": rss_before,
        "rss_peak_kib": _peak_rss_kib(),
    }
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


def run_bounded_round(spec: dict[str, Any], *, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``main`` in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "tests.cleaner.bounded_round_process", json.dumps(spec)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""One in-process cleaning round in its own process, SIGKILLed at a chosen step of the groups' swaps.

    python -m tests.cleaner.round_process '<json>'

JSON: ``directory``, ``segment_bytes`` (the config the round loads the log with), ``upper``, ``now_ms``,
and ``kill_at``: ``[step, n]`` = the n-th time (1-based) the step is reached:

- ``handed``: a group's ``.cleaned`` files are written and handed to its swap thread, which syncs and swaps
  them while the round writes the next group: the kill lands wherever both threads are;
- ``synced``: a group's files fsynced by its swap thread, not renamed yet;
- ``swap``, ``deleted``, ``renamed``: as in ``tests/cleaner/spark/round_process.py``.

Prints the round's end offset as JSON when it was not killed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cleaner.compaction.cleaner
import cleaner.compaction.group_swap
from cleaner.compaction.cleaner import Cleaner
from service.base.clock import ManualClock
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.segment import LogSegment
from tests.cleaner.helpers import compact_config
from tests.cleaner.kill_points import KillPoint, report_renames
from tests.paths import REPO


def install(kill: KillPoint) -> None:
    """Wrap the calls the groups' swaps make, so that each step reports itself after it is done."""
    report_renames(kill)
    sync_and_swap = cleaner.compaction.group_swap.sync_and_swap

    def synced_then_swapped(
        log: PartitionLog, cleaned: LogSegment, replaced: Sequence[LogSegment]
    ) -> list[LogSegment]:
        cleaned.flush()
        kill.reached("synced")
        return sync_and_swap(log, cleaned, replaced)

    cleaner.compaction.group_swap.sync_and_swap = synced_then_swapped

    class ReportedSwap(cleaner.compaction.group_swap.GroupSwap):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            kill.reached("handed")

    setattr(cleaner.compaction.cleaner, "GroupSwap", ReportedSwap)  # noqa: B010 (not an export of the module)


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    kill_at = spec["kill_at"]
    install(KillPoint(kill_at[0], int(kill_at[1])))
    clock = ManualClock(int(spec["now_ms"]))
    config = compact_config(segment_bytes=int(spec["segment_bytes"]))
    log = load_partition_log(Path(spec["directory"]), config, clock=clock).log

    def delete_now(_delay_ms: int, delete: Callable[[], None]) -> None:
        delete()

    result = Cleaner(clock=clock, schedule_delete=delete_now).clean(log, 0, int(spec["upper"]))
    log.close()
    sys.stdout.write(json.dumps({"end_offset": result.end_offset}) + "\n")
    return 0


def run_round_process(spec: dict[str, Any], *, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``main`` in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "tests.cleaner.round_process", json.dumps(spec)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv))

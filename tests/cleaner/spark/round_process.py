"""One Spark cleaning round in its own process, for the tests that need their own SparkSession (another
master) or must kill the process mid-round.

    python -m tests.cleaner.spark.round_process '<json>'

JSON: ``directory``, ``segment_bytes`` (the config the round loads the log with), ``first_dirty``,
``upper``, ``now_ms``, ``master``, and optionally ``kill_at``: the step at which the whole process group
(driver, JVM, Python workers) is SIGKILLed, ``[step, n]`` = the n-th time (1-based) the step is reached:

- ``cleaned``: every group's ``.cleaned`` files written, no swap started;
- ``swap``: a cleaned segment renamed ``.cleaned`` → ``.swap``;
- ``deleted``: an old segment renamed ``.deleted``;
- ``renamed``: a ``.swap`` renamed to its final name (before the directory fsync);
- ``swapped``: ``replace_segments`` returned, the replaced files not yet deleted.

Prints the round's end offset as JSON when it was not killed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cleaner.spark.engine import SparkEngine
from cleaner.spark.session import SparkSessionHolder
from service.base.clock import ManualClock
from service.storage.loader import load_partition_log
from tests.cleaner.helpers import compact_config
from tests.cleaner.kill_points import KillPoint, report_renames
from tests.paths import REPO


def install(kill: KillPoint) -> None:
    """Wrap the storage calls the swap protocol makes, so each step reports itself after it is done."""
    report_renames(kill)
    swap_in = SparkEngine._swap_in

    def swap_in_after_cleaned(self: SparkEngine, *args: Any, **kwargs: Any) -> None:
        kill.reached("cleaned")
        swap_in(self, *args, **kwargs)

    SparkEngine._swap_in = swap_in_after_cleaned  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    kill_at = spec.get("kill_at") or [None, 0]
    kill = KillPoint(kill_at[0], int(kill_at[1]), whole_group=True)
    install(kill)
    clock = ManualClock(int(spec["now_ms"]))
    config = compact_config(segment_bytes=int(spec["segment_bytes"]))
    log = load_partition_log(Path(spec["directory"]), config, clock=clock).log
    holder = SparkSessionHolder(
        {
            "spark.master": spec["master"],
            "spark.sql.shuffle.partitions": "2",
            "spark.local.dir": spec["scratch"],
        }
    )
    engine = SparkEngine(clock=clock, session=holder)

    def schedule_delete(_delay_ms: int, delete: Callable[[], None]) -> None:
        kill.reached("swapped")
        delete()

    try:
        result = engine.clean(
            log,
            int(spec["first_dirty"]),
            int(spec["upper"]),
            check_aborted=lambda: None,
            throttle=lambda _n: None,
            schedule_delete=schedule_delete,
        )
    finally:
        engine.close()
    log.close()
    sys.stdout.write(json.dumps({"end_offset": result.end_offset}) + "\n")
    return 0


def run_round_process(
    spec: dict[str, Any], scratch: Path, *, timeout_s: float = 240
) -> subprocess.CompletedProcess[str]:
    """Run ``main`` in a new process group (so a kill takes its JVM and workers too); scratch dirs inside
    ``scratch``."""
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARK_WORKER_DIR": str(scratch / "work")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.cleaner.spark.round_process",
            json.dumps({**spec, "scratch": str(scratch)}),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        start_new_session=True,
        check=False,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Two source trees' in-process engines on the same files, interleaved (issue 10): before/after figures on a
shared, loaded machine.

Run on demand (not part of CI's pass/fail):

    python tests/benchmarks/bench_inprocess_ab.py round PARTITION_DIR BEFORE_TREE AFTER_TREE [--runs 5]
    python tests/benchmarks/bench_inprocess_ab.py daemon LOG_DIR BEFORE_TREE AFTER_TREE [--runs 3]

``round``: a partition made by ``bench_spark_cleaner.generate_partition``; per run, ``cp -r`` of it (best of
two), then one round on a fresh copy with each tree, the order alternating, timed as ``run_oracle`` times it
(the replaced segments deleted after the clock stops, whatever the tree's own benchmark does). ``daemon``: a
log dir made by ``bench_many_logs.generate_topic``; per run, the daemon until all logs are clean
(``bench_many_logs.daemon_until_clean``) with ``log.cleaner.threads`` 1 and 2, each tree, the order reversed
every other run. Each measurement runs in its own process with ``PYTHONPATH`` set to its tree (build each
tree's C extensions first). Prints every run and the medians.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root: see copies.py
from tests.benchmarks.copies import cp_seconds

ONE_ROUND = """
import shutil, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/tests/benchmarks")
import bench_spark_cleaner as b
from cleaner.engine import InProcessEngine
from service.base.clock import SystemClock
from service.storage.loader import load_partition_log
directory = b.fresh_copy(Path(sys.argv[2]), Path(sys.argv[3]) / "gen-0-0")
log = load_partition_log(directory, b.config(), clock=SystemClock()).log
deletes = []
started = time.perf_counter()
InProcessEngine(SystemClock()).clean(
    log, 0, log.log_end_offset, check_aborted=b.noop, throttle=b.noop,
    schedule_delete=lambda _delay, delete: deletes.append(delete),
)
print(time.perf_counter() - started)
for delete in deletes:
    delete()
log.close()
shutil.rmtree(sys.argv[3])
"""
ONE_DAEMON = """
import shutil, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/tests/benchmarks")
import bench_many_logs as b
print(b.daemon_until_clean(b.fresh_copy(Path(sys.argv[2]), Path(sys.argv[3])), int(sys.argv[4])))
shutil.rmtree(sys.argv[3])
"""


def measure(script: str, tree: str, *args: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", script, tree, *args],
        cwd=tree,  # python -c puts the working directory first on sys.path
        env={**os.environ, "PYTHONPATH": tree},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("kind", choices=["round", "daemon"])
    parser.add_argument("source")
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work-dir", type=Path)
    args = parser.parse_args()
    trees = {"before": args.before, "after": args.after}
    keys = [(t, 0) for t in trees] if args.kind == "round" else [(t, n) for t in trees for n in (1, 2)]
    seconds: dict[tuple[str, int], list[float]] = {k: [] for k in keys}
    copies: list[float] = []
    with tempfile.TemporaryDirectory(dir=args.work_dir) as tmp:
        work = Path(tmp)
        for run in range(args.runs):
            if args.kind == "round":
                copies.append(min(cp_seconds(Path(args.source), work / "cp") for _ in range(2)))
                shutil.rmtree(work / "cp")
            for tree, threads in keys if run % 2 == 0 else list(reversed(keys)):
                target = str(work / f"{tree}-{threads}")
                if args.kind == "round":
                    seconds[(tree, threads)].append(measure(ONE_ROUND, trees[tree], args.source, target))
                else:
                    seconds[(tree, threads)].append(
                        measure(ONE_DAEMON, trees[tree], args.source, target, str(threads))
                    )
            line = "  ".join(
                f"{t}{f' threads={n}' if n else ''} {s[-1]:.2f} s" for (t, n), s in seconds.items()
            )
            copied = f"cp {copies[-1]:.2f} s  " if copies else ""
            print(f"run {run}: {copied}{line}  load {os.getloadavg()[0]:.1f}", flush=True)
    medians = {k: statistics.median(v) for k, v in seconds.items()}
    if args.kind == "round":
        cp = statistics.median(copies)
        for tree in trees:
            median = medians[(tree, 0)]
            print(f"{tree}: median {median:.2f} s, cp median {cp:.2f} s: {cp / median:.3f} of cp")
        print(f"after / before: {medians[('after', 0)] / medians[('before', 0)]:.2f}")
    else:
        for tree in trees:
            one, two = medians[(tree, 1)], medians[(tree, 2)]
            print(
                f"{tree}: threads=1 median {one:.2f} s, threads=2 median {two:.2f} s: ratio {two / one:.2f}"
            )


if __name__ == "__main__":
    main()

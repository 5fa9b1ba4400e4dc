"""One round with its key map bounded by a thread's share of the dedupe buffer, against the same round
unbounded, on the same files (issue 48, part 3): peak RSS, wall time, and whether the bytes match.

Run on demand (not part of CI's pass/fail):

    python tests/benchmarks/bench_key_map_budget.py [--records 30000000] [--keys 30000000] [--share-mib 64]
        [--runs 1] [--root DIR] [--keep] [--engine in-process|spark]

A key space as large as the records gives about 63% distinct keys (30M records: ~19M keys). The partition is
made once with ``bench_spark_cleaner.generate_partition`` (100-byte values, 128 MiB segments) under
``--root`` (default: a temporary dir; ``--keep`` keeps it, and a later run with the same shape reuses it).
Each run cleans a fresh ``cp -r`` of it twice, unbounded then bounded (the order alternating run to run),
each round in a process of its own, from offset 0 to the log end; it prints each round's wall time, its
process's peak RSS (``VmHWM``: ``ru_maxrss`` would keep the parent's across ``exec``) and that peak less
the RSS once the log was loaded, then whether the two rounds' dirs hold the same bytes.

``--engine spark``: each round on a SparkSession of its own (``local[2]``, started before the clock), the
engine's default ranges (a log this large: a rewrite task a core). Its figure is each Python worker's peak
RSS (``VmHWM`` of every process the session's daemon forked, read before the session stops: workers are
reused, so one worker's peak covers every task it ran), and the daemon's RSS they were forked from; the
driver holds no key map. The bounded round is then also compared with an unbounded in-process round's bytes.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root: see copies.py
from tests.benchmarks.copies import cp_seconds

REPO = Path(__file__).resolve().parents[2]
ONE_ROUND = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/tests/benchmarks")
import bench_spark_cleaner as b
from cleaner.compaction.key_map_budget import KeyMapBudget
from cleaner.engine import InProcessEngine
from service.base.clock import SystemClock
from service.storage.loader import load_partition_log

def status(field):
    with open("/proc/self/status") as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith(field))

share = int(sys.argv[3])
log = load_partition_log(Path(sys.argv[2]), b.config(), clock=SystemClock()).log
before = status("VmRSS:")
deletes = []
budget = KeyMapBudget(share) if share > 0 else None
started = time.perf_counter()
result = InProcessEngine(SystemClock(), key_map_budget=budget).clean(
    log, 0, log.log_end_offset, check_aborted=b.noop, throttle=b.noop,
    schedule_delete=lambda _delay, delete: deletes.append(delete),
)
seconds = time.perf_counter() - started
for delete in deletes:
    delete()
log.close()
print(json.dumps({"seconds": seconds, "peak_kib": status("VmHWM:"), "before_kib": before,
                  "keys": result.stats.map_size}))
"""

ONE_SPARK_ROUND = """
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/tests/benchmarks")
import bench_spark_cleaner as b
from cleaner.compaction.key_map_budget import KeyMapBudget
from cleaner.spark.engine import SparkEngine
from cleaner.spark.session import SparkSessionHolder
from service.base.clock import SystemClock
from service.storage.loader import load_partition_log

def status(pid, field):
    with open(f"/proc/{pid}/status") as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith(field))

def python_descendants():
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as stat:
                    parents[int(name)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    found, frontier = [], [os.getpid()]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid:
                frontier.append(child)
                with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                    if b"python" in cmdline.read().split(b"\\0")[0]:
                        found.append(child)
    return found

share = int(sys.argv[3])
holder = SparkSessionHolder({"spark.master": "local[2]"})
holder.get().range(1).collect()
log = load_partition_log(Path(sys.argv[2]), b.config(), clock=SystemClock()).log
deletes = []
budget = KeyMapBudget(share) if share > 0 else None
engine = SparkEngine(clock=SystemClock(), session=holder, key_map_budget=budget)
started = time.perf_counter()
result = engine.clean(
    log, 0, log.log_end_offset, check_aborted=b.noop, throttle=b.noop,
    schedule_delete=lambda _delay, delete: deletes.append(delete),
)
seconds = time.perf_counter() - started
processes = python_descendants()  # the daemon first, then its workers (its children)
peaks = sorted(((status(pid, "VmHWM:"), status(pid, "VmRSS:"), pid) for pid in processes), reverse=True)
engine.close()
for delete in deletes:
    delete()
log.close()
print(json.dumps({"seconds": seconds, "processes": peaks, "keys": result.stats.map_size,
                  "spill_classes": result.stats.spill_classes}))
"""


def one_round(directory: Path, share_bytes: int, engine: str = "in-process") -> dict[str, Any]:
    script = ONE_SPARK_ROUND if engine == "spark" else ONE_ROUND
    done = subprocess.run(
        [sys.executable, "-c", script, str(REPO), str(directory), str(share_bytes)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout.splitlines()[-1]))


def same_bytes(left: Path, right: Path) -> bool:
    names = sorted(p.name for p in left.iterdir())
    if names != sorted(p.name for p in right.iterdir()):
        return False
    _match, mismatch, errors = filecmp.cmpfiles(left, right, names, shallow=False)
    return not mismatch and not errors


def source_partition(root: Path, records: int, keys: int) -> Path:
    from tests.benchmarks import bench_spark_cleaner

    shape = root / f"r{records}-k{keys}"
    directory = shape / "gen-0-0"
    if not (shape / "done").exists():
        shutil.rmtree(shape, ignore_errors=True)
        shape.mkdir(parents=True)
        bench_spark_cleaner.generate_partition(shape, records, keys, 0.0)
        (shape / "done").touch()
    return directory


def in_process_same(root: Path, source: Path) -> bool:
    """An unbounded in-process round of a fresh copy, compared with the bounded Spark round's dir."""
    copy = root / "copy-in-process" / "gen-0-0"
    shutil.rmtree(copy.parent, ignore_errors=True)
    copy.parent.mkdir()
    cp_seconds(source, copy)
    report("in-process", one_round(copy, 0))
    return same_bytes(copy, root / "copy-bounded" / "gen-0-0")


def report_spark(what: str, out: dict[str, Any]) -> None:
    """Each Python process the session forked: its peak RSS (the daemon's among them, and the smallest)."""
    peaks = ", ".join(f"{hwm / 1024:,.1f}" for hwm, _rss, _pid in out["processes"])
    print(
        f"{what:>9}: {out['seconds']:7.2f} s  Python workers' peak RSS (MiB, daemon included) [{peaks}]  "
        f"keys {out['keys']:,}  spill classes {out['spill_classes']}",
        flush=True,
    )


def report(what: str, out: dict[str, Any]) -> None:
    peak, before = out["peak_kib"] / 1024, out["before_kib"] / 1024
    print(
        f"{what:>9}: {out['seconds']:7.2f} s  peak RSS {peak:7.1f} MiB  (loaded {before:5.1f} MiB, "
        f"round +{peak - before:6.1f} MiB)  keys {out['keys']:,}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000_000)
    parser.add_argument("--keys", type=int, default=None, help="key space (default: --records)")
    parser.add_argument("--share-mib", type=int, default=64)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--engine", choices=("in-process", "spark"), default="in-process")
    args = parser.parse_args()
    root = args.root or Path(tempfile.mkdtemp(prefix="bench-key-map-budget-"))
    try:
        source = source_partition(root, args.records, args.keys or args.records)
        print(f"{source}: {sum(p.stat().st_size for p in source.glob('*.log')) / 2**20:,.0f} MiB of segments")
        for run in range(args.runs):
            rounds: dict[str, dict[str, Any]] = {}
            order = [("unbounded", 0), ("bounded", args.share_mib << 20)]
            for what, share in order if run % 2 == 0 else order[::-1]:
                copy = root / f"copy-{what}" / "gen-0-0"
                shutil.rmtree(copy.parent, ignore_errors=True)
                copy.parent.mkdir()
                cp_seconds(source, copy)
                rounds[what] = one_round(copy, share, args.engine)
                (report_spark if args.engine == "spark" else report)(what, rounds[what])
            ratio = rounds["bounded"]["seconds"] / rounds["unbounded"]["seconds"]
            identical = same_bytes(root / "copy-bounded" / "gen-0-0", root / "copy-unbounded" / "gen-0-0")
            print(f"run {run + 1}: bounded/unbounded wall time {ratio:.2f}x; byte-identical: {identical}")
        if args.engine == "spark":
            identical = in_process_same(root, source)
            print(f"bounded Spark round byte-identical to the in-process engine's: {identical}")
    finally:
        for what in ("bounded", "unbounded", "in-process"):
            shutil.rmtree(root / f"copy-{what}", ignore_errors=True)
        if not args.keep and args.root is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

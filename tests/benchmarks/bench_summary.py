"""The whole-broker summary at a broker's worth of partitions (issue 50), set against a directory walk.

Run on demand (not part of CI's pass/fail), from the repository root:

    PYTHONPATH=$PWD python3 -m tests.benchmarks.bench_summary [--partitions 10000] [--rounds 3] [--compacted]
        [--keep DIR]

It builds ``bench_partitions.py``'s log dir (``--partitions`` copies of one generated partition: 3 segments
of 10 keyed records over the last 3 days, checkpoints and the clean-shutdown marker) and times, each round
after its own walk (``os.scandir`` + ``stat`` of every file):

- offline ``explain --summary --json`` (no record read), in a fresh process, under ``ulimit -n 4096``, and
  offline ``explain --json`` for reference (it reads the same per segment and writes every verdict);
- ``serve``'s ``GET /v1/explain/summary``: the first answer right after ``/readyz`` (the summary's first
  refresh starts with the scheduler: the request waits for what is left of it), then the median of 5
  answers (the ready document).

``--compacted`` gives every topic ``cleanup.policy=compact,delete`` with ``log.cleaner.min.cleanable.ratio=1``
(the cleaner picks none while it is measured): each log is then a compaction candidate, and offline
``explain --summary --exact`` (every record read) is timed too.

Targets: offline ``explain --summary`` ≤ 3× the walk; the live answer < 1 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from service.storage.log_files import RECOVERY_POINT_CHECKPOINT
from tests.benchmarks.bench_partitions import Serve, build_log_dir, get, offline, timed, walk

TARGET_OFFLINE_RATIO = 3.0
TARGET_LIVE_S = 1.0
ANSWERS = 5


def summary_answer(url: str) -> float:
    def once() -> None:
        status, body = get(url + "/v1/explain/summary", timeout_s=600)
        if status != 200 or b'"total_bytes"' not in body:
            raise SystemExit(f"GET /v1/explain/summary answered {status}")

    return timed(once)


def one_round(log_dir: Path, root: Path, overrides: dict[str, str], exact: bool) -> None:
    walk_s = statistics.median(timed(lambda: walk(log_dir)) for _ in range(3))
    extra = tuple(arg for key, value in overrides.items() for arg in ("--override", f"{key}={value}"))
    summary_s = offline(log_dir, "explain", "--summary", "--json", fd_limit=True, extra=extra)
    explain_s = offline(
        log_dir, "explain", "--json", fd_limit=True, extra=extra
    )  # the same reads, per segment
    exact_s = offline(log_dir, "explain", "--summary", "--exact", "--json", extra=extra) if exact else None
    serve = Serve(log_dir, root / "serve.stderr", extra=overrides)
    try:
        serve.wait_ready()
        first_s = summary_answer(serve.url)
        ready_s = statistics.median(summary_answer(serve.url) for _ in range(ANSWERS))
    finally:
        serve.stop()
    ratio = summary_s / walk_s
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'walk (os.scandir + stat)':52} {walk_s:8.3f} s")
    verdict = "ok" if ratio <= TARGET_OFFLINE_RATIO else "MISSED"
    name = "explain --summary --json (ulimit -n 4096)"
    print(f"{name:52} {summary_s:8.3f} s  {ratio:5.2f}×  (≤ 3×: {verdict})")
    print(f"{'explain --json (for reference)':52} {explain_s:8.3f} s  {explain_s / walk_s:5.2f}×")
    if exact_s is not None:
        print(f"{'explain --summary --exact --json':52} {exact_s:8.3f} s  {exact_s / walk_s:5.2f}×")
    print(f"{'GET /v1/explain/summary, first (builds it)':52} {first_s:8.3f} s")
    verdict = "ok" if ready_s < TARGET_LIVE_S else "MISSED"
    print(f"{'GET /v1/explain/summary, median of 5 (ready)':52} {ready_s:8.3f} s  (< 1 s: {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--compacted", action="store_true", help="every topic compact,delete (see above)")
    parser.add_argument(
        "--keep",
        type=Path,
        help="build the dir here and keep it; a dir built there before (by this or "
        "bench_partitions.py --keep) is reused",
    )
    args = parser.parse_args()
    overrides = {"log.cleaner.engine": "in-process"}
    if args.compacted:
        overrides |= {"log.cleanup.policy": "compact,delete", "log.cleaner.min.cleanable.ratio": "1"}
    with tempfile.TemporaryDirectory(prefix="logcleaner-bench-summary-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        log_dir = root / "logs"
        if (log_dir / RECOVERY_POINT_CHECKPOINT).exists():
            print(f"reusing {log_dir}")
        else:
            built = timed(lambda: build_log_dir(root, args.partitions))
            print(f"built {args.partitions} partitions in {built:.1f} s under {log_dir}")
        walk(log_dir)  # warm the page and dentry caches once, as every later step finds them
        for n in range(args.rounds):
            print(f"round {n + 1} of {args.rounds}")
            one_round(log_dir, root, overrides, args.compacted)


if __name__ == "__main__":
    main()

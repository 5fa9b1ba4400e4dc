"""In-process start-up and stop (issue 17): ``LogManager.startup()`` and ``shutdown()`` against a walk.

Run on demand, over a cleanly shut down log dir (``--build N`` first makes ``N`` partitions there as
``bench_partitions`` does, if the dir does not exist):

    PYTHONPATH=$PWD python3 tests/benchmarks/bench_startup.py DIR [--build 2000] [--rounds 3] [--profile P]

Each round walks the dir (``os.scandir`` + ``stat``, median of 3, warm), then starts a ``LogManager`` over
it and shuts it down (which leaves the dir cleanly shut down again for the next round), and prints both
times and their ratios to that round's walk, in wall time and in CPU time (this process's; steadier than
wall time on a machine others load). ``--profile`` writes cProfile stats of the last round's
start-up and stop (``out.startup``, ``out.shutdown``). It imports only ``service``, so the same file times
an older tree: ``PYTHONPATH=<old tree> python3 <this file> ...``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import statistics
import time
from pathlib import Path

from service.clock import SystemClock
from service.log_manager import LogManager, LogManagerSettings
from service.storage.log_config import LogConfig
from service.tasks import DeferredTasks


def walk(path: Path) -> int:
    """List every dir with ``os.scandir`` and ``stat`` every file (as ``bench_partitions`` does)."""
    count = 0
    stack = [str(path)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    os.stat(entry.path)
                    count += 1
    return count


def timed_walk(path: Path) -> tuple[float, float]:
    """Median wall and CPU seconds of 3 walks."""
    times, cpu_times = [], []
    for _ in range(3):
        start, cpu_start = time.perf_counter(), time.process_time()
        walk(path)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    return statistics.median(times), statistics.median(cpu_times)


def one_round(log_dir: Path, threads: int, profile: str | None) -> tuple[float, float, float, float, int]:
    """Wall and CPU seconds of start-up, then of stop, and the logs loaded."""
    config = LogConfig()
    manager = LogManager(
        [log_dir],
        lambda topic: config,
        clock=SystemClock(),
        scheduler=DeferredTasks(),
        settings=LogManagerSettings(recovery_threads_per_dir=threads),
    )
    profiler = cProfile.Profile() if profile else None
    start, cpu_start = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.runcall(manager.startup)
        profiler.dump_stats(f"{profile}.startup")
    else:
        manager.startup()
    startup_s, startup_cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
    logs = len(manager.logs)
    profiler = cProfile.Profile() if profile else None
    start, cpu_start = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.runcall(manager.shutdown)
        profiler.dump_stats(f"{profile}.shutdown")
    else:
        manager.shutdown()
    stop_s, stop_cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
    return startup_s, startup_cpu_s, stop_s, stop_cpu_s, logs


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("log_dir", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="num.recovery.threads.per.data.dir")
    parser.add_argument("--profile", help="cProfile the last round into PROFILE.startup/.shutdown")
    parser.add_argument("--build", type=int, metavar="N", help="build N partitions there if missing")
    args = parser.parse_args()
    if args.build and not args.log_dir.exists():
        from tests.benchmarks.bench_partitions import build_log_dir  # only here: old trees lack it

        args.log_dir.parent.mkdir(parents=True, exist_ok=True)
        build_log_dir(args.log_dir.parent, args.build)  # makes <parent>/seed and <parent>/logs
        if args.log_dir.name != "logs":
            (args.log_dir.parent / "logs").rename(args.log_dir)
    walk(args.log_dir)  # warm the caches
    for n in range(args.rounds):
        walk_s, walk_cpu_s = timed_walk(args.log_dir)
        gc.collect()
        profile = args.profile if n == args.rounds - 1 else None
        startup_s, startup_cpu_s, stop_s, stop_cpu_s, logs = one_round(args.log_dir, args.threads, profile)
        print(
            f"round {n + 1}: {logs} logs; walk {walk_s:.3f} s; start-up {startup_s:.3f} s "
            f"({startup_s / walk_s:.2f}x); stop {stop_s:.3f} s ({stop_s / walk_s:.2f}x); CPU ratios "
            f"(less sensitive to other load): start-up {startup_cpu_s / walk_cpu_s:.2f}x, stop "
            f"{stop_cpu_s / walk_cpu_s:.2f}x{' (profiled)' if profile else ''}",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""In-process start-up and stop (issue 17): ``LogManager.startup()`` and ``shutdown()`` against a walk.

Run on demand, over a cleanly shut down log dir (``--build N`` first makes ``N`` partitions there as
``bench_partitions`` does, if the dir does not exist):

    PYTHONPATH=$PWD python3 tests/benchmarks/bench_startup.py DIR [--build 2000] [--rounds 3] [--profile P]
    PYTHONPATH=$PWD python3 tests/benchmarks/bench_startup.py DIR --serve [--rounds 3]

Each round walks the dir (``os.scandir`` + ``stat``, median of 3, warm), then starts a ``LogManager`` over
it and shuts it down (which leaves the dir cleanly shut down again for the next round), and prints both
times and their ratios to that round's walk, in wall time and in CPU time (this process's; steadier than
wall time on a machine others load). ``--serve`` times ``logcleaner serve`` instead, in a fresh process run
from the same tree: to ``/readyz`` 200, and from SIGTERM to its exit (its CPU time from ``/proc``).
``--profile`` writes cProfile stats of the last round's start-up and stop (``P.startup``, ``P.shutdown``).
It imports only ``service``, so the same file times an older tree: ``PYTHONPATH=<old tree> python3 <this
file> ...``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import service
from service.base.clock import SystemClock
from service.core.log_manager import LogManager, LogManagerSettings
from service.core.tasks import DeferredTasks
from service.storage.log_config import LogConfig


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
    startup_s, startup_cpu_s = timed_call(manager.startup, profile and f"{profile}.startup")
    logs = len(manager.logs)
    stop_s, stop_cpu_s = timed_call(manager.shutdown, profile and f"{profile}.shutdown")
    return startup_s, startup_cpu_s, stop_s, stop_cpu_s, logs


def timed_call(call: Callable[[], object], profile_path: str | None) -> tuple[float, float]:
    """Wall and CPU seconds of ``call``; with ``profile_path``, under cProfile, its stats written there."""
    start, cpu_start = time.perf_counter(), time.process_time()
    if profile_path:
        profiler = cProfile.Profile()
        profiler.runcall(call)
        profiler.dump_stats(profile_path)
    else:
        call()
    return time.perf_counter() - start, time.process_time() - cpu_start


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process, from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_ready(port: int, process: subprocess.Popen[bytes]) -> bool:
    """Poll ``serve``'s ``/readyz`` until it answers 200 (True) or the process exits first (False)."""
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        if process.poll() is not None:
            return False
        time.sleep(0.02)


def serve_command(log_dir: Path, port: int, extra: dict[str, str] | None = None) -> list[str]:
    """``logcleaner serve`` on ``log_dir`` and ``port`` as the start-up benchmarks run it: no scheduled task
    before an hour, the in-process engine, time enough to stop; the ``extra`` overrides on top."""
    settings = {
        "log.dirs": str(log_dir),
        "api.port": str(port),
        "scheduler.initial.delay.ms": "3600000",
        "log.cleaner.engine": "in-process",
        "shutdown.timeout.ms": "600000",
        **(extra or {}),
    }
    args = [sys.executable, "-m", "service", "serve"]
    for key, value in settings.items():
        args += ["--override", f"{key}={value}"]
    return args


def serve_round(log_dir: Path) -> tuple[float, float, float, float]:
    """``serve`` from the tree ``service`` is imported from (its root as the working dir, so that ``-m``
    finds that tree first): wall and CPU seconds to ``/readyz`` 200, then from SIGTERM to the exit."""
    port = free_port()
    tree = Path(service.__file__).resolve().parent.parent
    args = serve_command(log_dir, port)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen(args, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_until_ready(port, process):
        raise SystemExit(f"serve exited {process.returncode} before it was ready")
    startup_s, startup_cpu_s = time.perf_counter() - start, process_cpu_s(process.pid)
    time.sleep(0.5)
    idle_cpu_s = process_cpu_s(process.pid)
    start = time.perf_counter()
    process.send_signal(signal.SIGTERM)
    if process.wait() != 0:
        raise SystemExit(f"serve exited {process.returncode} on SIGTERM")
    stop_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total_cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return startup_s, startup_cpu_s, stop_s, total_cpu_s - idle_cpu_s


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("log_dir", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="num.recovery.threads.per.data.dir")
    parser.add_argument("--profile", help="cProfile the last round into PROFILE.startup/.shutdown")
    parser.add_argument("--serve", action="store_true", help="time `serve` (a fresh process) instead")
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
        if args.serve:
            startup_s, startup_cpu_s, stop_s, stop_cpu_s = serve_round(args.log_dir)
            logs, profile = 0, None
        else:
            startup_s, startup_cpu_s, stop_s, stop_cpu_s, logs = one_round(
                args.log_dir, args.threads, profile
            )
        print(
            f"round {n + 1}: {'serve' if args.serve else f'{logs} logs'}; walk {walk_s:.3f} s; "
            f"start-up {startup_s:.3f} s "
            f"({startup_s / walk_s:.2f}x); stop {stop_s:.3f} s ({stop_s / walk_s:.2f}x); CPU ratios "
            f"(less sensitive to other load): start-up {startup_cpu_s / walk_cpu_s:.2f}x, stop "
            f"{stop_cpu_s / walk_cpu_s:.2f}x{' (profiled)' if profile else ''}",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""A broker's worth of partitions (issue 17): every figure set against a directory walk of the same dir.

Run on demand (not part of CI's pass/fail), from the repository root:

    PYTHONPATH=$PWD python3 -m tests.benchmarks.bench_partitions [--partitions 10000] [--start-stop-only]
    PYTHONPATH=$PWD python3 -m tests.benchmarks.bench_partitions --offline-only --rounds 3 [--compare-tree D]
    PYTHONPATH=$PWD python3 -m tests.benchmarks.bench_partitions [--partitions 10000] --stop-after-retention
    PYTHONPATH=$PWD python3 -m tests.benchmarks.bench_partitions --startup-only --rounds 3 [--compare-tree D]
    PYTHONPATH=$PWD python3 -m tests.benchmarks.bench_partitions --load-only --rounds 5 [--repeats 3] \
        [--compare-tree D]

It builds, under a temporary folder removed at the end, one log dir as a clean shutdown leaves it:
``--partitions`` copies (topics ``bench-<i // 100>``, partitions ``<i % 100>``) of one partition written by
``logcleaner gen`` (3 segments of 10 records, timestamps spread over the last 3 days, so a retention of
2 days deletes the oldest segment of each), both offset checkpoints and the clean-shutdown marker. Then,
in one run, each figure and its ratio to a Python ``os.scandir`` + ``stat`` walk of the dir:

- ``serve`` start-up to ``/readyz`` 200 (clean), in a fresh process;
- ``/metrics``: the median of several scrapes, and the median of the scrapes that ran while a retention
  pass (``POST /v1/retention/run``, deleting a segment of every partition) was in flight;
- ``GET /v1/retention/explain`` over the whole dir, and the daemon's descriptors before and after it;
- SIGTERM to the exit of the process (flush, close, checkpoints, marker);
- offline ``explain --json`` under ``ulimit -n 4096`` and offline ``retention --dry-run``.

``--startup-only`` times only ``serve``'s start-up to ``/readyz`` (then an untimed SIGTERM stop), ``--rounds``
times, each round after its own walk, and from ``--compare-tree`` too, interleaved.

``--load-only`` times the three reads of the whole dir in each round (each the median of ``--repeats``
runs), after that round's walk (the median of three): ``serve``'s start-up to ``/readyz`` (then an
untimed SIGTERM stop), offline ``explain --json`` and offline ``retention --dry-run``, on the dir as built
(a clean shutdown, nothing deleted), from ``--compare-tree`` too, interleaved; the medians of the rounds'
ratios close the run. Each is also set against the walk in CPU time (``[cpu]``: the command's processes'
user + system seconds, ``serve``'s up to ``/readyz``, over the walk's), which moves less than wall time
when others load the machine.

``--offline-only`` times only the two offline commands (``--rounds`` times each, walk and commands
interleaved), on the dir as the full run leaves it for them: ``serve`` is started, one retention pass
deleting a segment of every partition runs, and SIGTERM stops it, all untimed. ``--compare-tree`` runs
each command from another source tree too (the code before a change), in the same rounds.

Targets (ratios to the walk): start-up ≤ 2, stop ≤ 2, ``/metrics`` ≤ 0.4 (≤ 0.6 while a task runs),
``GET /v1/retention/explain`` ≤ 3, offline explain ≤ 2.5 and dry-run ≤ 2 (issue 47).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.clean_shutdown import write_clean_shutdown_marker
from service.storage.log_files import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)
from service.storage.topic_partition import TopicPartition
from tests.benchmarks.bench_log_manager import copy_partition

DAY_MS = 86_400_000
RECORDS = 30  # 3 segments of 10 records
PARTITIONS_PER_TOPIC = 100
SCRAPES = 5
FD_LIMIT = 4096
# serve's INFO phase lines
PHASES = ("listed in", "left by retention", "flushed and closed", " stopped in ", "Shut down cleanly")
TARGETS = {
    "start-up to /readyz": 2.0,
    "SIGTERM stop": 2.0,
    "/metrics median": 0.4,
    "/metrics during retention": 0.6,
    "GET /v1/retention/explain": 3.0,
    "explain --json (ulimit -n 4096)": 2.5,
    "retention --dry-run": 2.0,
}


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "service", *args]


def build_log_dir(root: Path, partitions: int) -> Path:
    """``partitions`` copies of one generated partition, with checkpoints and the clean-shutdown marker."""
    seed = root / "seed"
    subprocess.run(
        cli(
            "gen", "--log-dir", str(seed), "--topic", "bench", "--records", str(RECORDS),
            "--batch-size", "10", "--value-size", "100", "--segment-bytes", "1500",
            "--timestamp-spread", str(3 * DAY_MS),
        ),
        check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    files = [(p.name, p.read_bytes()) for p in sorted((seed / "bench-0").iterdir())]
    log_dir = root / "logs"
    log_dir.mkdir()
    tps = [
        TopicPartition(f"bench-{i // PARTITIONS_PER_TOPIC}", i % PARTITIONS_PER_TOPIC)
        for i in range(partitions)
    ]
    copy_partition(log_dir, tps, files)
    OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).write(dict.fromkeys(tps, RECORDS))
    OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).write({})
    write_clean_shutdown_marker(log_dir)
    return log_dir


def walk(path: Path) -> int:
    """What the figures are set against: list every dir with ``os.scandir`` and ``stat`` every file."""
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, timeout_s: float = 120.0, method: str = "GET") -> tuple[int, bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), bytes(exc.read())
    except OSError:
        return 0, b""


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Serve:
    """A ``logcleaner serve`` process over the log dir (its stderr, the INFO log, kept in a file)."""

    def __init__(
        self,
        log_dir: Path,
        stderr_path: Path,
        tree: Path | None = None,
        extra: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        overrides = {
            "log.dirs": str(log_dir),
            "api.port": str(self.port),
            "log.retention.ms": str(2 * DAY_MS),
            "scheduler.initial.delay.ms": "3600000",  # no scheduled task during the measurement
            "log.cleaner.engine": "in-process",
            "shutdown.timeout.ms": "600000",
            **(extra or {}),
        }
        args = ["-v", "serve"]
        for key, value in overrides.items():
            args += ["--override", f"{key}={value}"]
        self._stderr = stderr_path.open("w")
        self.started = time.perf_counter()
        env = None if tree is None else {**os.environ, "PYTHONPATH": str(tree)}
        self.process = subprocess.Popen(
            cli(*args), stdout=subprocess.DEVNULL, stderr=self._stderr, cwd=tree, env=env
        )

    def wait_ready(self) -> float:
        while get(self.url + "/readyz", timeout_s=5)[0] != 200:
            if self.process.poll() is not None:
                raise SystemExit(f"serve exited with {self.process.returncode} before it was ready")
            time.sleep(0.02)
        return time.perf_counter() - self.started

    def stop(self) -> float:
        start = time.perf_counter()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait()
        elapsed = time.perf_counter() - start
        self._stderr.close()
        if code != 0:
            raise SystemExit(f"serve exited {code} on SIGTERM")
        return elapsed


def scrape(url: str) -> float:
    def once() -> None:
        status, _ = get(url + "/metrics")
        if status != 200:
            raise SystemExit(f"/metrics answered {status}")

    return timed(once)


def scrapes_during_retention(url: str) -> tuple[list[float], float]:
    """Scrape back to back while a retention pass runs; returns the scrapes' times and the pass's."""
    done = threading.Event()
    result: dict[str, float] = {}

    def run_retention() -> None:
        result["retention"] = timed(lambda: get(url + "/v1/retention/run", timeout_s=600, method="POST"))
        done.set()

    thread = threading.Thread(target=run_retention)
    thread.start()
    times = []
    while not done.is_set():
        times.append(scrape(url))
    thread.join()
    return times, result["retention"]


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process, from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's ended children (and theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def limit_fds() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))


def offline(
    log_dir: Path, *args: str, fd_limit: bool = False, tree: Path | None = None, extra: tuple[str, ...] = ()
) -> float:
    """One offline command in a fresh process; ``tree``: run that source tree's code (from its root);
    ``extra``: more ``--override`` arguments."""
    env = None if tree is None else {**os.environ, "PYTHONPATH": str(tree)}

    def run() -> None:
        completed = subprocess.run(
            cli(
                *args,
                "--override",
                f"log.dirs={log_dir}",
                "--override",
                f"log.retention.ms={2 * DAY_MS}",
                *extra,
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=limit_fds if fd_limit else None,
            check=False,
            cwd=tree,
            env=env,
        )
        if completed.returncode != 0:
            raise SystemExit(
                f"{' '.join(args)} exited {completed.returncode}: {completed.stderr.decode()[-500:]}"
            )

    return timed(run)


def print_phases(stderr_path: Path) -> None:
    for line in stderr_path.read_text().splitlines():
        if any(phase in line for phase in PHASES):
            print("  serve:", line.split(" INFO ", 1)[-1])


def offline_only(log_dir: Path, root: Path, rounds: int, compare_tree: Path | None) -> None:
    """The offline commands alone, on the dir as a full run leaves it (see the module docstring);
    ``compare_tree``: each also run from that source tree, interleaved (before/after in one run)."""
    serve = Serve(log_dir, root / "serve.stderr")
    serve.wait_ready()
    get(serve.url + "/v1/retention/run", timeout_s=600, method="POST")
    serve.stop()

    def measure(label: str, tree: Path | None) -> dict[str, float]:
        explain = offline(log_dir, "explain", "--json", fd_limit=True, tree=tree)
        dry_run = offline(log_dir, "retention", "--dry-run", tree=tree)
        return {f"explain --json (ulimit -n 4096){label}": explain, f"retention --dry-run{label}": dry_run}

    interleaved_rounds(log_dir, rounds, compare_tree, measure)


def startup_only(log_dir: Path, root: Path, rounds: int, compare_tree: Path | None) -> None:
    """``serve``'s start-up alone, ``rounds`` times (each round: a walk, then each tree's start-up)."""

    def measure(label: str, tree: Path | None) -> dict[str, float]:
        serve = Serve(log_dir, root / "serve.stderr", tree)
        ready_s = serve.wait_ready()
        serve.stop()
        return {"start-up to /readyz" + label: ready_s}

    interleaved_rounds(log_dir, rounds, compare_tree, measure)


def load_only(log_dir: Path, root: Path, rounds: int, compare_tree: Path | None, repeats: int = 1) -> None:
    """Start-up, offline explain and dry-run over the dir as built, ``rounds`` times, then the medians;
    each figure of a round is the median of ``repeats`` runs of its command (the walk's is of three)."""

    def measure(label: str, tree: Path | None) -> dict[str, float]:
        runs = [measure_once(label, tree) for _ in range(repeats)]
        return {name: statistics.median(run[name] for run in runs) for name in runs[0]}

    def measure_once(label: str, tree: Path | None) -> dict[str, float]:
        serve = Serve(log_dir, root / "serve.stderr", tree)
        ready_s = serve.wait_ready()
        ready_cpu_s = process_cpu_s(serve.process.pid)
        serve.stop()
        figures = {"start-up to /readyz" + label: ready_s}
        figures["start-up to /readyz [cpu]" + label] = ready_cpu_s * walk_wall_per_cpu[0]
        for name, args, fd_limit in (
            ("explain --json (ulimit -n 4096)", ("explain", "--json"), True),
            ("retention --dry-run", ("retention", "--dry-run"), False),
        ):
            before = children_cpu_s()
            figures[name + label] = offline(log_dir, *args, fd_limit=fd_limit, tree=tree)
            figures[f"{name} [cpu]{label}"] = (children_cpu_s() - before) * walk_wall_per_cpu[0]
        return figures

    # A [cpu] figure is scaled by the round's walk's wall/CPU, so that its ratio to the walk's wall time
    # is its CPU time's ratio to the walk's CPU time.
    walk_wall_per_cpu = [1.0]

    def walk_cpu() -> None:
        start_cpu, start = time.process_time(), time.perf_counter()
        walk(log_dir)
        walk_wall_per_cpu[0] = (time.perf_counter() - start) / max(time.process_time() - start_cpu, 1e-6)

    ratios = interleaved_rounds(log_dir, rounds, compare_tree, measure, before_round=walk_cpu)
    print(f"medians of {rounds} rounds' ratios to their walk:")
    for name, values in ratios.items():
        target = TARGETS.get(name.split(" [")[0])
        verdict = "" if target is None else f"  (target ≤ {target}×)"
        print(f"  {name:62} {statistics.median(values):6.2f}×{verdict}")


def interleaved_rounds(
    log_dir: Path,
    rounds: int,
    compare_tree: Path | None,
    measure: Callable[[str, Path | None], dict[str, float]],
    before_round: Callable[[], None] | None = None,
) -> dict[str, list[float]]:
    """``rounds`` times: a walk, then ``measure`` from each tree (``compare_tree`` first, if given), the
    figures reported as ratios to that round's walk; returns each figure's ratios, round by round."""
    trees: dict[str, Path | None] = {"": None}
    if compare_tree is not None:
        trees = {f" [{compare_tree}]": compare_tree, " [this tree]": None}
    ratios: dict[str, list[float]] = {}
    for n in range(rounds):
        walk_s = statistics.median(timed(lambda: walk(log_dir)) for _ in range(3))
        if before_round is not None:
            before_round()
        figures: dict[str, float] = {}
        for label, tree in trees.items():
            figures.update(measure(label, tree))
        print(f"round {n + 1} of {rounds}, load average {os.getloadavg()[0]:.1f}")
        report(figures, walk_s)
        for name, seconds in figures.items():
            ratios.setdefault(name, []).append(seconds / walk_s)
    return ratios


def report(figures: dict[str, float], walk_s: float) -> None:
    print(f"{'walk (os.scandir + stat)':62} {walk_s:8.2f} s")
    for name, seconds in figures.items():
        target = TARGETS.get(name.split(" [")[0])
        ratio = seconds / walk_s
        verdict = "" if target is None else f"  (target ≤ {target}×: {'ok' if ratio <= target else 'MISSED'})"
        print(f"{name:62} {seconds:8.2f} s  {ratio:6.2f}×{verdict}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument(
        "--keep", type=Path, help="build the dir here and keep it (for profiling); a dir it built is reused"
    )
    parser.add_argument(
        "--start-stop-only",
        action="store_true",
        help="only start-up and SIGTERM stop (and one /metrics median): skip the retention pass, the "
        "explain calls and the offline commands, which take minutes at 10,000 partitions",
    )
    parser.add_argument(
        "--offline-only",
        action="store_true",
        help="only offline explain --json and retention --dry-run, after an untimed retention pass",
    )
    parser.add_argument(
        "--startup-only",
        action="store_true",
        help="only serve's start-up to /readyz (an untimed SIGTERM stop after each), --rounds times",
    )
    parser.add_argument(
        "--load-only",
        action="store_true",
        help="only start-up to /readyz, offline explain --json and retention --dry-run, on the dir as built",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="with --offline-only, --startup-only or --load-only: rounds"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="with --load-only: run each command this many times a round and take the median (the walk's "
        "is the median of three), for a machine whose times move between runs",
    )
    parser.add_argument(
        "--compare-tree",
        type=Path,
        help="with --offline-only, --startup-only or --load-only: also run each from this source tree "
        "(a `git archive` of the base commit, with the built extensions copied in), interleaved",
    )
    parser.add_argument(
        "--stop-after-retention",
        action="store_true",
        help="only start-up, one retention pass (POST /v1/retention/run, no scrapes meanwhile) and the "
        "SIGTERM stop right after it",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="logcleaner-bench-partitions-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        log_dir = root / "logs"
        if (log_dir / RECOVERY_POINT_CHECKPOINT).exists():
            print(f"reusing {log_dir}")
        else:
            built = timed(lambda: build_log_dir(root, args.partitions))
            print(f"built {args.partitions} partitions in {built:.1f} s under {log_dir}")
        walk(log_dir)  # warm the page and dentry caches once, as every later step finds them
        if args.offline_only:
            offline_only(log_dir, root, args.rounds, args.compare_tree)
        elif args.load_only:
            load_only(log_dir, root, args.rounds, args.compare_tree, args.repeats)
        elif args.startup_only:
            startup_only(log_dir, root, args.rounds, args.compare_tree)
        elif serve_and_stop(log_dir, root, args) and args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def serve_and_stop(log_dir: Path, root: Path, args: argparse.Namespace) -> bool:
    """Times serve's start-up, scrapes, and (unless --start-stop-only or --stop-after-retention) explain, a
    retention pass with scrapes meanwhile and the offline commands; prints the figures. True: the full run."""
    walk_s = statistics.median(timed(lambda: walk(log_dir)) for _ in range(3))
    figures: dict[str, float] = {}
    serve = Serve(log_dir, root / "serve.stderr")
    figures["start-up to /readyz"] = serve.wait_ready()
    fds_start = open_fds(serve.process.pid)
    scrape(serve.url)  # the first scrape reads each sealed segment's last time-index entry once
    figures["/metrics median"] = statistics.median(scrape(serve.url) for _ in range(SCRAPES))
    if args.stop_after_retention:
        url = serve.url + "/v1/retention/run"
        figures["(retention pass, deleting)"] = timed(lambda: get(url, timeout_s=600, method="POST"))
    if args.start_stop_only or args.stop_after_retention:
        figures["SIGTERM stop"] = serve.stop()
        print_phases(root / "serve.stderr")
        report(figures, walk_s)
        return False
    status = 0

    def explain() -> None:
        nonlocal status
        status = get(serve.url + "/v1/retention/explain", timeout_s=600)[0]

    figures["GET /v1/retention/explain"] = timed(explain)
    fds_after = open_fds(serve.process.pid)
    during, retention_s = scrapes_during_retention(serve.url)
    figures["/metrics during retention"] = statistics.median(during)
    figures["(retention pass, deleting)"] = retention_s
    figures["SIGTERM stop"] = serve.stop()
    figures["explain --json (ulimit -n 4096)"] = offline(log_dir, "explain", "--json", fd_limit=True)
    figures["retention --dry-run"] = offline(log_dir, "retention", "--dry-run")
    print(f"partitions: {args.partitions}; descriptors of serve: {fds_start} after start-up, {fds_after} "
          f"after GET /v1/retention/explain ({status}); {len(during)} scrapes during the retention pass "
          f"(max {max(during):.2f} s)")  # fmt: skip
    print_phases(root / "serve.stderr")
    report(figures, walk_s)
    return True


if __name__ == "__main__":
    main()

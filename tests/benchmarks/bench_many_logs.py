"""Many logs at once (issue 10): several logs per Spark job, and two in-process cleaner threads.

Run on demand (not part of CI's pass/fail):

    python tests/benchmarks/bench_many_logs.py [--logs 8] [--records 300000] [--pairs 3] [--skip-spark]

Under a temporary folder it generates with ``logcleaner gen``'s library one compacted topic of ``--logs``
partitions (``--records`` records each, 100-byte values, ``--records / 10`` keys, 5% tombstones, 16 MiB
segments), rolled so every segment is cleanable. On fresh copies of those files (synced to disk first), in the
same run, each timed run started right after a copy of the input is removed (``copies.pages_to_free``: its
new pages recycled, as ``cp``'s are):

- ``cp -r`` of the log dir (the baseline);
- the daemon's cleaner pool, in-process engine, after one unmeasured run, ``log.cleaner.threads=1`` then
  ``=2``, ``--pairs`` times: from start until every log's checkpoint reached its active segment (read
  after each round's end, which sets an event: the benchmark takes no GIL while the workers run), with
  each worker's time on a CPU, waiting for one (other processes, the swap threads) and asleep (the GIL,
  locks, fsyncs), and the process's CPU (the cores it kept busy);
- Spark forced (``local[*]``, one SparkSession, warmed up on a small log first), every log cleaned as
  ``logcleaner clean`` does (``LogCleaner.clean_filthiest_logs`` until none is left) with
  ``log.cleaner.spark.max.logs.per.job=1`` (one job per log) and ``=--logs`` (all in one job), alternating,
  ``--pairs`` times each after one unmeasured run of each way, each run split into the time its Spark
  actions took and the rest, with the CPU of this process, its JVM and Spark's Python workers.

Each comparison prints its pairs' ratios, the ratio of its medians, and the floor that ratio would have on
this machine with the same work and no core ever idle (a run's CPU over the cores). (Spark's output is
checked against the in-process engine by the tests, not here.)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # no stubs installed; the CPU of the JVM and its workers

from cleaner.engine import CompactionEngine, InProcessEngine, PerRoundEngine
from cleaner.pool.manager import CleanerManager
from service.base.clock import SystemClock
from service.config.broker_config import BrokerConfig
from service.config.topic_store import TopicConfigStore
from service.core.cpus import usable_cpus
from service.core.engine_choice import EngineChoice
from service.core.log_manager import LogManager
from service.core.tasks import DeferredTasks
from service.shell.node import build_compacted_log_manager, build_log_cleaner
from service.shell.tools.gen import GenOptions, generate
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root: see copies.py
from tests.benchmarks.copies import free_pages, fresh_copy, pages_to_free

SEGMENT_BYTES = 16 << 20
COMPACT = frozenset({"compact"})
TOPIC = "bench"
MiB = 1 << 20
CORES = usable_cpus()  # as the cleaner counts them (a container's CPU quota included)


def generate_topic(log_dir: Path, logs: int, records: int) -> None:
    options = GenOptions(
        log_dir=log_dir,
        topics=(TOPIC,),
        partitions=logs,
        records=records,
        keys=max(records // 10, 1),
        tombstones=0.05,
        segment_bytes=SEGMENT_BYTES,
        cleanup_policy=COMPACT,
    )
    generate(options)
    for directory in sorted(log_dir.glob(f"{TOPIC}-*")):
        log = load_partition_log(
            directory, LogConfig(segment_bytes=SEGMENT_BYTES, cleanup_policy=COMPACT), clock=SystemClock()
        ).log
        log.roll()
        log.close()


def log_bytes(log_dir: Path) -> int:
    return sum(p.stat().st_size for p in log_dir.glob(f"{TOPIC}-*/*.log"))


def broker(log_dir: Path, **overrides: str) -> BrokerConfig:
    props = {"log.dirs": str(log_dir), "log.cleaner.backoff.ms": "20", **overrides}
    config, _ = BrokerConfig.from_properties(props)
    return config


def open_manager(config: BrokerConfig) -> tuple[LogManager, CleanerManager, DeferredTasks]:
    tasks = DeferredTasks()
    log_dir = Path(config.log_dirs[0])
    manager, cleaning = build_compacted_log_manager(
        config, TopicConfigStore([log_dir]), clock=SystemClock(), scheduler=tasks
    )
    manager.startup()
    return manager, cleaning, tasks


def thread_times_ms(native_id: int | None) -> tuple[float, float] | None:
    """A thread's (time on a CPU, time runnable but waiting for one) since it started, in ms (Linux
    schedstat); None where that is not available."""
    try:
        on_cpu, waiting, _ = Path(f"/proc/self/task/{native_id}/schedstat").read_text().split()
    except (OSError, ValueError):
        return None
    return int(on_cpu) / 1e6, int(waiting) / 1e6


def cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) so far of this process (``driver``) and its descendants: the JVM
    (``jvm``) and Spark's Python workers (``workers``, reused from job to job), when Spark runs."""
    me = psutil.Process()
    spent = {"driver": sum(me.cpu_times()[:2])}
    for child in me.children(recursive=True):
        try:
            kind = "jvm" if child.name() == "java" else "workers"
            spent[kind] = spent.get(kind, 0.0) + sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            continue
    return spent


def cpu_since(before: dict[str, float]) -> dict[str, float]:
    return {kind: spent - before.get(kind, 0.0) for kind, spent in cpu_seconds().items()}


def daemon_until_clean(
    log_dir: Path, threads: int, freed: Path
) -> tuple[float, list[tuple[float, float] | None], float]:
    """The cleaner pool with ``threads`` in-process workers, from start (right after ``freed`` is removed:
    ``copies.pages_to_free``) until every log is clean: the seconds, per worker ``thread_times_ms`` over
    that time (the rest of it the worker slept: the GIL, a lock, a swap's fsyncs), and the process's CPU
    seconds (its put and swap threads too)."""
    config = broker(log_dir, **{"log.cleaner.engine": "in-process", "log.cleaner.threads": str(threads)})
    manager, cleaning, tasks = open_manager(config)
    targets = {tp: log.active_segment.base_offset for tp, log in manager.logs.items()}
    round_ended = threading.Event()  # the checkpoint is read after each round: no polling for the GIL
    cleaner = build_log_cleaner(
        config,
        manager,
        cleaning,
        InProcessEngine(manager.clock),
        scheduler=tasks,
        on_round=lambda _engine, _seconds: round_ended.set(),
    )
    checkpoint = OffsetCheckpointFile(log_dir / "cleaner-offset-checkpoint")
    free_pages(freed)
    started, cpu_before = time.perf_counter(), cpu_seconds()
    cleaner.start()
    try:
        while True:
            round_ended.clear()
            done = checkpoint.read() if checkpoint.path.exists() else {}
            if all(done.get(tp, -1) >= end for tp, end in targets.items()):
                break
            round_ended.wait(1.0)
        elapsed, cpu = time.perf_counter() - started, cpu_since(cpu_before)["driver"]
        times = [thread_times_ms(worker.thread.native_id) for worker in cleaner.workers]
    finally:
        cleaner.shutdown()
        tasks.run_all()
        manager.shutdown()
    return elapsed, times, cpu


def offline_clean(
    log_dir: Path, engine: CompactionEngine, config: BrokerConfig, freed: Path | None = None
) -> tuple[float, int, dict[str, float]]:
    """``logcleaner clean``'s loop over every log, started right after ``freed`` is removed (if given:
    ``copies.pages_to_free``): (seconds, rounds, ``cpu_seconds`` spent meanwhile)."""
    manager, cleaning, tasks = open_manager(config)
    cleaner = build_log_cleaner(config, manager, cleaning, engine, scheduler=tasks, threads=0)
    if freed is not None:
        free_pages(freed)
    started, cpu_before = time.perf_counter(), cpu_seconds()
    rounds = 0
    while outcomes := cleaner.clean_filthiest_logs():
        if any(o is None for o in outcomes):
            raise RuntimeError("a round failed")
        rounds += len(outcomes)
    elapsed, cpu = time.perf_counter() - started, cpu_since(cpu_before)
    tasks.run_all()
    manager.shutdown()
    return elapsed, rounds, cpu


def spark_runs(source: Path, work: Path, logs: int, pairs: int) -> None:
    from cleaner.spark.engine import SparkEngine
    from cleaner.spark.session import SparkSessionHolder

    holder = SparkSessionHolder({"spark.master": "local[*]"})
    jobs: list[float] = []
    spark = SparkEngine(clock=SystemClock(), session=holder, on_job=jobs.append)
    try:
        warm = work / "warm"
        warm.mkdir(parents=True)
        generate_topic(warm, 2, 20_000)  # warms the session, its JVM and its Python workers up
        config = broker(warm, **{"log.cleaner.engine": "spark"})
        offline_clean(
            warm,
            PerRoundEngine(EngineChoice.of(config), InProcessEngine(SystemClock()), lambda: spark),
            config,
        )
        seconds_by: dict[int, list[float]] = {logs: [], 1: []}
        cpu_by: dict[int, list[float]] = {logs: [], 1: []}
        # the first full-size job of a session runs on memory its workers never touched, which costs more
        # on this project's VM, and the JVM compiles each way's code as it first runs it (a job per log
        # schedules eight times the jobs: its first runs cost its JVM 1.4-2.1 s of CPU, later ones 0.6-0.7):
        # an unmeasured pair first, then alternating pairs
        warm_up = 2
        for turn, per_job in enumerate((logs, 1) * (pairs + 1)):
            config = broker(
                work / "spark",
                **{"log.cleaner.engine": "spark", "log.cleaner.spark.max.logs.per.job": str(per_job)},
            )
            engine = PerRoundEngine(EngineChoice.of(config), InProcessEngine(SystemClock()), lambda: spark)
            target = fresh_copy(source, work / "spark")
            jobs.clear()
            freed = pages_to_free(source, work / "freed")
            seconds, rounds, cpu = offline_clean(target, engine, config, freed)
            if turn >= warm_up:
                seconds_by[per_job].append(seconds)
                cpu_by[per_job].append(sum(cpu.values()))
            print(
                f"spark local[*], max.logs.per.job={per_job}: {seconds:.2f} s, {rounds} rounds, "
                f"{len(jobs)} Spark jobs ({log_bytes(source) / MiB / seconds:.1f} MiB/s; "
                f"{sum(jobs):.2f} s in the jobs' actions, {seconds - sum(jobs):.2f} s outside them: "
                "the plans, and the swaps after an action); CPU "
                + ", ".join(f"{kind} {spent:.2f} s" for kind, spent in cpu.items())
                + f" ({sum(cpu.values()) / seconds:.2f} cores busy)"
                + ("" if turn >= warm_up else " (warm-up, not counted)"),
                flush=True,
            )
        ratios = [one / per_log for one, per_log in zip(seconds_by[logs], seconds_by[1], strict=True)]
        per_log = statistics.median(seconds_by[1])
        print(
            f"  {logs} logs in one job / one job per log: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f"; medians {statistics.median(seconds_by[logs]) / per_log:.2f} (target <= 0.5). "
            + f"Its CPU spread over all {CORES} cores, none ever idle, would take "
            + f"{statistics.median(cpu_by[logs]) / CORES / per_log:.2f} of one job per log's time"
        )
    finally:
        spark.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--logs", type=int, default=8)
    parser.add_argument("--records", type=int, default=300_000, help="records per log")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--pairs", type=int, default=3, help="measured pairs of each comparison")
    args = parser.parse_args()
    if args.work_dir is not None:
        args.work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.work_dir) as tmp:
        work = Path(tmp)
        source = work / "source"
        source.mkdir()
        generate_topic(source, args.logs, args.records)
        size = log_bytes(source)
        print(f"{args.logs} logs, {size / MiB:.1f} MiB of .log in all", flush=True)
        copies = []
        for _ in range(3):
            shutil.rmtree(work / "cp", ignore_errors=True)
            started = time.perf_counter()
            subprocess.run(["cp", "-r", str(source), str(work / "cp")], check=True)
            copies.append(time.perf_counter() - started)
        print(f"cp -r: best {min(copies):.3f} s of 3", flush=True)
        # the process's first run pays for memory it never touched (this project's VM: ~8 µs a page), which
        # later runs reuse: an unmeasured one first, then alternating pairs
        daemon_until_clean(fresh_copy(source, work / "daemon"), 1, pages_to_free(source, work / "freed"))
        daemon_seconds: dict[int, list[float]] = {1: [], 2: []}
        busy: dict[int, list[float]] = {1: [], 2: []}  # cores the process kept busy
        for threads in (1, 2) * args.pairs:
            target = fresh_copy(source, work / "daemon")
            seconds, times, cpu = daemon_until_clean(target, threads, pages_to_free(source, work / "freed"))
            daemon_seconds[threads].append(seconds)
            busy[threads].append(cpu / seconds)
            split = ", ".join(
                f"{on_cpu:.0f}/{waiting:.0f}/{seconds * 1000 - on_cpu - waiting:.0f}"
                for on_cpu, waiting in filter(None, times)
            )
            print(
                f"in-process daemon, log.cleaner.threads={threads}: {seconds:.2f} s, CPU {cpu:.2f} s "
                f"({cpu / seconds:.2f} cores busy; per worker, ms on a CPU/waiting for one/asleep: {split})",
                flush=True,
            )
        ratios = [two / one for one, two in zip(daemon_seconds[1], daemon_seconds[2], strict=True)]
        print(
            "  threads=2 / threads=1: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f"; medians {statistics.median(daemon_seconds[2]) / statistics.median(daemon_seconds[1]):.2f}"
            + f" (target <= 0.6). One thread keeps {statistics.median(busy[1]):.2f} cores busy: with the same"
            + f" work and all {CORES} cores always busy, two would take"
            + f" {statistics.median(busy[1]) / CORES:.2f} of its time",
            flush=True,
        )
        if not args.skip_spark:
            spark_runs(source, work, args.logs, args.pairs)


if __name__ == "__main__":
    main()

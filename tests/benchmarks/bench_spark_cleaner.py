"""Log cleaner benchmark (issues 4, 10): one compaction round of a generated partition, Spark and in-process.

Run on demand (not part of CI's pass/fail):

    python tests/benchmarks/bench_spark_cleaner.py [--records 10000000] [--big-records 40000000]
        [--skip-spark]

Under a temporary folder (removed at the end; ``--work-dir`` to choose where) it generates with
``logcleaner gen``'s library one compacted partition: ``--records`` records of 100-byte values over
``--keys`` distinct keys, ``--tombstones`` of them null, 128 MiB segments, then rolls it so every segment is
cleanable. On copies of those same files, in the same run, it measures:

- ``cp -r`` of the partition dir (the baseline: reading and writing every byte once), the best of three, each
  after a ``sync`` and with the previous copy removed (on this project's machine a copy made while earlier
  copies stayed on disk took 1.5–2.9 s instead of 0.33 s);
- one round (first dirty 0, upper bound the log end) with ``SparkEngine`` on ``local[*]``, after a job that
  starts a Python worker per core and a warm-up round on a small log, so the session, its JVM and its
  Python workers are warm (the replaced segments deleted after the timing, as for the in-process round
  below);
- the same round with the in-process engine (``InProcessEngine``, its C core unless
  ``LOGCLEANER_PURE_PYTHON=1``), fully, ``--repeats`` times, each right after a Spark round, so that both
  engines' medians come from the same stretch of the host's time (``--oracle-records`` runs it once on a
  smaller partition and extrapolates linearly, say so; the replaced segments are deleted after the timing,
  as the daemon deletes them later);
  Spark ÷ in-process at a size is what ``log.cleaner.spark.min.bytes`` is chosen by (``--skip-spark``: only
  ``cp`` and the in-process round);
- ``local-cluster[2,1,1024]`` (two executor JVMs, one core each) against ``local[1]``;
- the driver's peak RSS (Python driver process, sampled with psutil every 50 ms; the driver JVM reported
  apart) at ``--records`` and at ``--big-records`` (default 4× as many: about 4 GiB).

Each timed cleaning round starts right after a copy of its input is removed (``copies.pages_to_free``): its
new pages are recycled, as ``cp``'s are and as a loaded host's are (the RSS run at ``--big-records`` is
timed without). On this project's VM a round on pages its host took back ran 0.15-0.6 s slower.

``--baseline-tree DIR`` (another checkout of the project, its C extensions built) also runs the Spark round
with that tree's code, alternating with this tree's on fresh copies of the same files, ``--repeats`` times
each: a before/after comparison from one run on a shared machine.

Each Spark round runs in its own process (one SparkSession per process, each master its own), which
prints one JSON line; this process only orchestrates, copies and times ``cp`` and the oracle.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # no stubs installed; used only here, for RSS

from cleaner.engine import InProcessEngine
from service.base.clock import SystemClock
from service.shell.tools.gen import GenOptions, generate
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root: see copies.py
from tests.benchmarks.copies import cp_seconds, free_pages, fresh_copy, pages_to_free

REPO = Path(__file__).resolve().parents[2]
SEGMENT_BYTES = 128 << 20
COMPACT = frozenset({"compact"})
MiB = 1 << 20


def config() -> LogConfig:
    return LogConfig(segment_bytes=SEGMENT_BYTES, cleanup_policy=COMPACT)


def generate_partition(root: Path, records: int, keys: int, tombstones: float) -> Path:
    """``gen`` one compacted partition under ``root``, then roll it so that every segment is cleanable."""
    options = GenOptions(
        log_dir=root,
        records=records,
        keys=keys,
        tombstones=tombstones,
        segment_bytes=SEGMENT_BYTES,
        cleanup_policy=COMPACT,
    )
    generate(options)
    directory = root / "gen-0-0"
    log = load_partition_log(directory, config(), clock=SystemClock()).log
    log.roll()
    log.close()
    return directory


def dir_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.name.endswith(".log"))


def noop(*_args: object) -> None:
    return None


def run_oracle(directory: Path, freed: Path) -> float:
    """One in-process round, started right after ``freed`` is removed (``copies.pages_to_free``); the
    replaced segments are deleted after the clock stops, as the daemon deletes them
    ``file.delete.delay.ms`` later on the scheduler's thread, not in the round."""
    log = load_partition_log(directory, config(), clock=SystemClock()).log
    deletes: list[Callable[[], None]] = []
    free_pages(freed)
    started = time.perf_counter()
    InProcessEngine(SystemClock()).clean(
        log,
        0,
        log.log_end_offset,
        check_aborted=noop,
        throttle=noop,
        schedule_delete=lambda _delay, delete: deletes.append(delete),
    )
    elapsed = time.perf_counter() - started
    for delete in deletes:
        delete()
    log.close()
    return elapsed


# -- one Spark round, in its own process ---------------------------------------------------------------


class PeakRss:
    """Samples this process's RSS (and its child JVM's) every 50 ms; keeps the peaks."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.peak = 0
        self.jvm_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self.me.memory_info().rss)
            jvm = sum(c.memory_info().rss for c in self.me.children() if c.name() == "java")
            self.jvm_peak = max(self.jvm_peak, jvm)  # the driver JVM (executor JVMs are its children)


# the in-process round's line, whichever way it was timed
IN_PROCESS = "in-process (C core unless LOGCLEANER_PURE_PYTHON=1)"


def start_python_workers(context: Any) -> None:
    """One Python worker per core, as a session that has run a round in the last minute has (Spark forks a
    worker per concurrent task and ends one idle for a minute; a worker forked within a round costs it
    0.3-0.7 s on this machine). The warm-up round alone would start only one: its small log is one task."""
    tasks = context.defaultParallelism
    context.parallelize(range(tasks), tasks).foreach(lambda _item: time.sleep(0.3))


def spark_round(master: str, directory: Path, warm_dir: Path, freed: Path | None) -> dict[str, Any]:
    from cleaner.spark.engine import SparkEngine
    from cleaner.spark.session import SparkSessionHolder

    holder = SparkSessionHolder({"spark.master": master})
    jobs: list[float] = []
    engine = SparkEngine(clock=SystemClock(), session=holder, on_job=jobs.append)
    deletes: list[Callable[[], None]] = []  # the round's deletions, run after its clock stops
    try:
        start_python_workers(holder.get().sparkContext)
        for target, timed in ((warm_dir, False), (directory, True)):
            jobs.clear()
            log = load_partition_log(target, config(), clock=SystemClock()).log
            deletes.clear()
            if timed and freed is not None:
                free_pages(freed)  # after the session's start and the warm-up, which take pages too
            with PeakRss() as rss:
                started = time.perf_counter()
                result = engine.clean(
                    log,
                    0,
                    log.log_end_offset,
                    check_aborted=noop,
                    throttle=noop,
                    schedule_delete=lambda _delay, delete: deletes.append(delete),
                )
                elapsed = time.perf_counter() - started
            for delete in deletes:  # after the clock stops, as run_oracle does (the daemon deletes later)
                delete()
            log.close()
            if timed:
                stats = result.stats
                return {
                    "seconds": elapsed,
                    "map_s": stats.map_build_ms / 1000,
                    "jobs_s": list(jobs),
                    "bytes_read": stats.bytes_read,
                    "bytes_written": stats.bytes_written,
                    "map_size": stats.map_size,
                    "driver_rss": rss.peak,
                    "driver_jvm_rss": rss.jvm_peak,
                }
    finally:
        engine.close()
    raise AssertionError("unreachable")


def spark_round_process(
    master: str, directory: Path, warm_source: Path, freed: Path | None, tree: Path = REPO
) -> dict[str, Any]:
    """A fresh process: warm-up round on a copy of ``warm_source``, then the timed round on ``directory``,
    started right after ``freed`` is removed (``copies.pages_to_free``; None: no such copy); ``tree``: whose
    code runs it (a tree whose script has no ``--free-pages`` is given none, and has ``freed`` removed
    before it starts)."""
    warm_dir = fresh_copy(warm_source, directory.parent.parent / f"warm-{directory.parent.name}" / "gen-0-0")
    script = tree / "tests" / "benchmarks" / Path(__file__).name
    command = [sys.executable, str(script), "--spark-round", master, str(directory), str(warm_dir)]
    if freed is not None and "--free-pages" in script.read_text():
        command += ["--free-pages", str(freed)]
    elif freed is not None:
        free_pages(freed)
    done = subprocess.run(
        command,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    shutil.rmtree(warm_dir.parent, ignore_errors=True)
    if done.returncode != 0:
        raise RuntimeError(f"spark round on {master} failed:\n{done.stderr[-4000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# -- the run ---------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--big-records", type=int, help="the RSS run's size [4 × --records; 0 skips it]")
    parser.add_argument("--keys", type=int, help="distinct keys [--records / 10]")
    parser.add_argument("--tombstones", type=float, default=0.05)
    parser.add_argument("--oracle-records", type=int, help="run the oracle on this many records, extrapolate")
    parser.add_argument("--skip-cluster", action="store_true", help="no local-cluster / local[1] comparison")
    parser.add_argument("--skip-spark", action="store_true", help="only cp and the in-process engine")
    parser.add_argument("--work-dir", type=Path, help="where the data goes [a temporary dir]")
    parser.add_argument("--baseline-tree", type=Path, help="also time the Spark round with this checkout")
    parser.add_argument(
        "--repeats", type=int, default=1, help="Spark rounds per tree, alternating, and in-process rounds [1]"
    )
    parser.add_argument("--spark-round", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--free-pages", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.spark_round:
        master, directory, warm = args.spark_round
        result = spark_round(master, Path(directory), Path(warm), args.free_pages)
        sys.stdout.write(json.dumps(result) + "\n")
        return
    if args.work_dir is not None:
        args.work_dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-spark-", dir=args.work_dir))
    try:
        run(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class Inputs:
    """The run's generated partitions and where each timed round's ``pages_to_free`` copy goes."""

    root: Path
    source: Path
    warm: Path
    size: int
    keys: int
    freed: Path

    def fresh(self, name: str) -> Path:
        return fresh_copy(self.source, self.root / name / "gen-0-0")

    def pages(self) -> Path:
        return pages_to_free(self.source, self.freed)


def run(root: Path, args: argparse.Namespace) -> None:
    inputs = generate_inputs(root, args)
    cp_s = time_cp(inputs)
    oracle_times: list[float] = []
    spark = None
    if not args.skip_spark:
        spark = time_spark_rounds(inputs, args, cp_s, oracle_times)
    oracle_s = time_oracle(inputs, args, cp_s, oracle_times)
    if spark is None:
        return
    print(
        f"  spark / in-process: {oracle_s / spark['seconds']:.2f}x "
        "(log.cleaner.spark.min.bytes: auto must not send rounds of this size to Spark unless > 1)"
    )
    if not args.skip_cluster:
        compare_cluster(inputs)
    big_records = args.records * 4 if args.big_records is None else args.big_records
    if big_records:
        measure_big_rss(inputs, args, big_records)


def generate_inputs(root: Path, args: argparse.Namespace) -> Inputs:
    keys = args.keys or max(args.records // 10, 1)
    print(
        f"generating {args.records:,} records, {keys:,} keys, {args.tombstones:.0%} tombstones ...",
        flush=True,
    )
    source = generate_partition(root / "source", args.records, keys, args.tombstones)
    warm = root / "warm"
    if not args.skip_spark:
        warm = generate_partition(warm, 200_000, 20_000, args.tombstones)
    size = dir_bytes(source)
    freed = root / "freed" / "gen-0-0"  # each timed run's pages_to_free copy
    print(f"partition: {size / MiB:,.0f} MiB of .log in {len(list(source.glob('*.log')))} segments")
    return Inputs(root=root, source=source, warm=warm, size=size, keys=keys, freed=freed)


def time_cp(inputs: Inputs) -> float:
    """The best of three ``cp -r`` of the source, after one that puts it in the page cache."""
    root = inputs.root
    cp_seconds(inputs.source, root / "cp")  # the page cache holds the source from here on
    cp_times = []
    for _ in range(3):  # each copy removed before the next: as a round's copy, it reuses freed pages
        cp_times.append(cp_seconds(inputs.source, root / "cp"))
    shutil.rmtree(root / "cp", ignore_errors=True)
    cp_s = min(cp_times)
    report("cp -r", cp_s, inputs.size)
    return cp_s


def oracle_round(inputs: Inputs, oracle_times: list[float]) -> None:
    target = inputs.fresh("oracle")
    oracle_times.append(run_oracle(target, inputs.pages()))
    shutil.rmtree(inputs.root / "oracle", ignore_errors=True)
    report(IN_PROCESS, oracle_times[-1], inputs.size)


def time_spark_rounds(
    inputs: Inputs, args: argparse.Namespace, cp_s: float, oracle_times: list[float]
) -> dict[str, Any]:
    """``--repeats`` Spark rounds per tree, alternating, each followed by an in-process round unless
    ``--oracle-records``; prints the medians and returns this tree's median run."""
    trees = [("this tree", REPO)]
    if args.baseline_tree is not None:
        trees.append(("baseline", args.baseline_tree.resolve()))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _tree in trees}
    for i in range(args.repeats):
        for name, tree in trees if i % 2 == 0 else trees[::-1]:
            runs[name].append(timed_spark_round(inputs, name, tree))
        if not args.oracle_records:
            oracle_round(inputs, oracle_times)
    spark = median_run(runs["this tree"], args.repeats)
    print(f"  vs cp: {cp_s / spark['seconds']:.3f} of cp's throughput (median run; target >= 0.40)")
    print_rss(spark)
    if args.baseline_tree is not None:
        base = median_run(runs["baseline"], args.repeats)
        print(f"  this tree / baseline (medians): {spark['seconds'] / base['seconds']:.3f} of the time")
    return spark


def timed_spark_round(inputs: Inputs, name: str, tree: Path) -> dict[str, Any]:
    target = inputs.fresh("spark")
    result = spark_round_process("local[*]", target, inputs.warm, inputs.pages(), tree)
    jobs = ", ".join(f"{s:.1f}" for s in result.get("jobs_s", []))
    report(
        f"spark local[*] ({name})",
        result["seconds"],
        inputs.size,
        extra=f"map phase {result['map_s']:.1f} s, Spark jobs [{jobs}] s",
    )
    shutil.rmtree(inputs.root / "spark", ignore_errors=True)
    return result


def median_run(runs: list[dict[str, Any]], repeats: int) -> dict[str, Any]:
    return sorted(runs, key=lambda r: float(r["seconds"]))[(repeats - 1) // 2]


def time_oracle(inputs: Inputs, args: argparse.Namespace, cp_s: float, oracle_times: list[float]) -> float:
    """The in-process round's figure: extrapolated from ``--oracle-records``, or the median of the rounds
    (those still missing run here: ``--skip-spark`` has no Spark rounds to interleave them with)."""
    if args.oracle_records:
        small = generate_partition(
            inputs.root / "oracle-source", args.oracle_records, inputs.keys, args.tombstones
        )
        oracle_s = run_oracle(small, pages_to_free(small, inputs.freed)) * inputs.size / dir_bytes(small)
        print(f"oracle on {args.oracle_records:,} records, extrapolated linearly to the full partition")
        report(IN_PROCESS, oracle_s, inputs.size)
    else:
        while len(oracle_times) < args.repeats:
            oracle_round(inputs, oracle_times)
        oracle_s = sorted(oracle_times)[(args.repeats - 1) // 2]
    which = "extrapolated" if args.oracle_records else "median run"
    print(f"  vs cp: {cp_s / oracle_s:.3f} of cp's throughput ({which}; target >= 0.33)")
    return oracle_s


def compare_cluster(inputs: Inputs) -> None:
    """``local-cluster[2,1,1024]`` (two executor JVMs, one core each) against ``local[1]``."""
    target = inputs.fresh("one")
    one = spark_round_process("local[1]", target, inputs.warm, inputs.pages())
    shutil.rmtree(inputs.root / "one", ignore_errors=True)
    report("spark local[1]", one["seconds"], inputs.size)
    target = inputs.fresh("cluster")
    cluster = spark_round_process("local-cluster[2,1,1024]", target, inputs.warm, inputs.pages())
    shutil.rmtree(inputs.root / "cluster", ignore_errors=True)
    report("spark local-cluster[2,1,1024]", cluster["seconds"], inputs.size)
    print(f"  local-cluster vs local[1]: {one['seconds'] / cluster['seconds']:.2f}x (target >= 1.6x)")
    print_rss(cluster)


def measure_big_rss(inputs: Inputs, args: argparse.Namespace, big_records: int) -> None:
    """One Spark round on a partition ``big_records`` long, for the driver's peak RSS (the source is removed
    first, to leave room)."""
    shutil.rmtree(inputs.source, ignore_errors=True)
    big = generate_partition(inputs.root / "big", big_records, big_records // 10, args.tombstones)
    big_size = dir_bytes(big)
    result = spark_round_process("local[*]", big, inputs.warm, None)  # a run for its RSS
    report(f"spark local[*], {big_size / (1 << 30):.1f} GiB", result["seconds"], big_size)
    print(
        f"  driver peak RSS {result['driver_rss'] / MiB:,.0f} MiB (target < 1024), "
        f"driver JVM {result['driver_jvm_rss'] / MiB:,.0f} MiB"
    )


def print_rss(result: dict[str, Any]) -> None:
    python_mib, jvm_mib = result["driver_rss"] / MiB, result["driver_jvm_rss"] / MiB
    print(f"  driver peak RSS {python_mib:,.0f} MiB (Python), driver JVM {jvm_mib:,.0f} MiB")


def report(what: str, seconds: float, size: int, *, extra: str = "") -> None:
    print(f"{what}: {seconds:.2f} s, {size / MiB / seconds:,.1f} MiB/s {extra}".rstrip(), flush=True)


if __name__ == "__main__":
    main()

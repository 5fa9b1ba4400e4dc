"""LogManager benchmark (issue 3): start-up after a clean shutdown, and retention passes over 100k segments.

Run on demand (not part of CI's pass/fail):

    python tests/benchmarks/bench_log_manager.py [--partitions 10000] [--segments 10]

It builds, under a temporary folder removed at the end, one log dir as a clean shutdown leaves it:
``--partitions`` partition dirs (topics ``bench-<i // 10>``, partitions ``<i % 10>``) of ``--segments``
segments each, every segment one small v2 batch of 3 records with real timestamps, a trimmed ``.index``
and a ``.timeindex`` holding the final entry, both offset checkpoints and ``.kafka_cleanshutdown``. The
first segment of every partition is 30 days old, the others one hour. Then it measures, in the same run:

- start-up (``LogManager.startup()``) in a fresh subprocess, with its peak RSS, against walking the tree
  with ``os.scandir`` and a ``stat`` of every file (target ≤ 3 s);
- one retention pass (``cleanup_logs``) with nothing to delete (retention.ms 60 days, retention.bytes
  1 GiB): the first pass, which reads each partition's oldest time-index entry, and the steady state,
  which must do no file I/O (audit-hook count here; ``strace`` on the subprocess if installed), against a
  bare loop reading one attribute of every segment (target ≤ 50 ms);
- the same pass with retention.ms 7 days, so the oldest segment of every partition (10%) expires: as
  ``delete_old_segments(log, dry_run=True)`` over all logs, then as a real pass renaming them to
  ``.deleted``, against ``os.replace`` of as many files in a scratch dir.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from service.base.clock import SystemClock
from service.core.log_manager import LogManager, LogManagerSettings
from service.core.tasks import DeferredTasks
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.clean_shutdown import write_clean_shutdown_marker
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig
from service.storage.log_files import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    partition_dir_name,
)
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
RECORDS_PER_SEGMENT = 3
OLD_AGE_MS = 30 * DAY_MS
STEADY_PASSES = 5
KEEP_ALL = LogConfig(retention_ms=60 * DAY_MS, retention_bytes=2**30)  # catches nothing
EXPIRE_OLDEST = LogConfig(retention_ms=7 * DAY_MS, retention_bytes=2**30)  # catches the 30-day-old segments
BEGIN_MARKER = "/logcleaner-bench-begin-steady-passes"
END_MARKER = "/logcleaner-bench-end-steady-passes"


# -- the fixture -------------------------------------------------------------------------------------


def build_template(directory: Path, segments: int, now_ms: int) -> dict[str, bytes]:
    """One partition written and closed by the real storage layer; returns {file name: bytes}."""
    directory.mkdir()
    log = load_partition_log(directory, LogConfig(), clock=SystemClock()).log
    for n in range(segments):
        age = OLD_AGE_MS if n == 0 else HOUR_MS
        log.append_records(
            [Record(0, now_ms - age + i, b"key-%d" % i, b"value-%d" % i) for i in range(RECORDS_PER_SEGMENT)]
        )
        if n < segments - 1:
            log.roll()
    log.close()
    files = {p.name: p.read_bytes() for p in sorted(directory.iterdir())}
    shutil.rmtree(directory)
    return files


def build_log_dir(root: Path, partitions: int, segments: int) -> Path:
    """The log dir: ``partitions`` copies of the template partition, checkpoints, clean-shutdown marker."""
    now_ms = SystemClock().now_ms()
    files = list(build_template(root / "template-0", segments, now_ms).items())
    log_dir = root / "logs"
    log_dir.mkdir()
    tps = [TopicPartition(f"bench-{i // 10}", i % 10) for i in range(partitions)]
    copy_partition(log_dir, tps, files)
    log_end_offset = segments * RECORDS_PER_SEGMENT
    OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).write(dict.fromkeys(tps, log_end_offset))
    # Kafka checkpoints a log start offset only above the first segment's base: none here.
    OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT).write({})
    write_clean_shutdown_marker(log_dir)
    return log_dir


def copy_partition(log_dir: Path, tps: list[TopicPartition], files: list[tuple[str, bytes]]) -> None:
    """A partition dir holding ``files`` for each of ``tps`` (raw writes: building 100k dirs stays quick)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for tp in tps:
        directory = os.path.join(log_dir, partition_dir_name(tp.topic, tp.partition))
        os.mkdir(directory)
        for name, data in files:
            fd = os.open(os.path.join(directory, name), flags, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)


def verify_sample(log_dir: Path, partitions: int, segments: int) -> None:
    """A few partitions reload as written: clean load, and a full recovery (every CRC) changes nothing."""
    end = segments * RECORDS_PER_SEGMENT
    scratch = log_dir.parent / "verify"
    for i in sorted({0, partitions // 2, partitions - 1}):
        directory = log_dir / partition_dir_name(f"bench-{i // 10}", i % 10)
        for clean_shutdown in (True, False):
            copy = scratch / directory.name
            shutil.copytree(directory, copy)
            result = load_partition_log(
                copy, LogConfig(), clock=SystemClock(), recovery_point=0, clean_shutdown=clean_shutdown
            )
            log = result.log
            if log.log_end_offset != end or len(log.segments) != segments or result.truncated_bytes:
                raise SystemExit(f"{directory}: did not reload as written ({result})")
            if len(log.read(0, 10 * end)) != end:
                raise SystemExit(f"{directory}: cannot read back its {end} records")
            if result.recovered_segments != (0 if clean_shutdown else segments):
                raise SystemExit(f"{directory}: {result.recovered_segments} segments rebuilt")
            log.close()
            shutil.rmtree(copy)


# -- b. start-up ----------------------------------------------------------------------------------------


def new_manager(log_dir: Path, config: LogConfig, scheduler: DeferredTasks | None = None) -> LogManager:
    return LogManager(
        [log_dir],
        lambda topic: config,
        clock=SystemClock(),
        scheduler=scheduler or DeferredTasks(),
        settings=LogManagerSettings(),
    )


def startup_worker(log_dir: Path) -> None:
    """In a fresh process: start up (timed, peak RSS), then serve the strace check, then shut down."""
    rss_before_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    manager = new_manager(log_dir, KEEP_ALL)
    start = time.perf_counter()
    manager.startup()
    startup_s = time.perf_counter() - start
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    logs = manager.logs
    result = {
        "startup_s": startup_s,
        "rss_before_kib": rss_before_kib,
        "rss_kib": rss_kib,
        "logs": len(logs),
        "segments": sum(len(log.segments) for log in logs.values()),
    }
    manager.cleanup_logs()  # the first pass: loads the oldest segments' timestamps
    print(json.dumps(result), flush=True)
    if sys.stdin.readline().strip() == "go":  # the parent has attached strace
        os.path.exists(BEGIN_MARKER)  # a stat the trace shows where the passes begin
        for _ in range(STEADY_PASSES):
            manager.cleanup_logs()
        os.path.exists(END_MARKER)
        print("done", flush=True)
    sys.stdin.readline()
    start = time.perf_counter()
    manager.shutdown()  # leaves the dir cleanly shut down again for the next measurement
    print(json.dumps({"shutdown_s": time.perf_counter() - start}), flush=True)


def walk_and_stat(log_dir: Path) -> int:
    """The least I/O any loader needs: list every dir and stat every file."""
    count = 0
    with os.scandir(log_dir) as top:
        for entry in top:
            if entry.is_dir():
                with os.scandir(entry.path) as files:
                    for file in files:
                        file.stat()
                        count += 1
            else:
                entry.stat()
                count += 1
    return count


def bench_startup(log_dir: Path, use_strace: bool) -> tuple[dict[str, float], int | None]:
    """Start-up in a subprocess; returns its figures and the file syscalls of its steady retention passes."""
    start = time.perf_counter()
    files = walk_and_stat(log_dir)
    walk_s = time.perf_counter() - start
    worker = subprocess.Popen(
        [sys.executable, __file__, "--startup-worker", str(log_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    if worker.stdin is None or worker.stdout is None:
        raise SystemExit("no pipe to the start-up worker")
    result = json.loads(worker.stdout.readline())
    syscalls = None
    if use_strace:
        syscalls = strace_steady_passes(worker.pid, worker.stdin, worker.stdout)
    else:
        worker.stdin.write("skip\n")
    worker.stdin.write("exit\n")
    worker.stdin.flush()
    result.update(json.loads(worker.stdout.readline()))
    if worker.wait() != 0:
        raise SystemExit("the start-up worker failed")
    rss_mib = result["rss_kib"] / 1024
    report(
        "start-up",
        f"{result['startup_s']:.2f} s for {result['logs']:,} logs, {result['segments']:,} segments; "
        f"scandir+stat of {files:,} files {walk_s:.2f} s",
        f"{result['startup_s'] / walk_s:.1f}× the walk (target ≤ 3 s)",
    )
    report(
        "peak RSS",
        f"{rss_mib:,.0f} MiB after start-up ({result['rss_before_kib'] / 1024:,.0f} MiB after imports)",
        f"{(result['rss_kib'] - result['rss_before_kib']) * 1024 / result['segments']:,.0f} bytes/segment",
    )
    print(f"  (shutdown, not a target: {result['shutdown_s']:.2f} s)")
    return result, syscalls


def strace_steady_passes(pid: int, stdin: IO[str], stdout: IO[str]) -> int:
    """Attach strace to the worker, let it run its steady passes, count file syscalls between markers."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        tracer = subprocess.Popen(
            ["strace", "-f", "-e", "trace=%file,%desc", "-o", out.name, "-p", str(pid)],
            stderr=subprocess.PIPE,
            text=True,
        )
        if tracer.stderr is None:
            raise SystemExit("no pipe from strace")
        while "attached" not in tracer.stderr.readline():
            pass
        stdin.write("go\n")
        stdin.flush()
        if stdout.readline().strip() != "done":
            raise SystemExit("the start-up worker did not run its passes")
        tracer.send_signal(signal.SIGINT)
        tracer.communicate()
        lines = out.read().splitlines()
    begin = next(i for i, line in enumerate(lines) if BEGIN_MARKER in line)
    end = next(i for i, line in enumerate(lines) if END_MARKER in line)
    between = lines[begin + 1 : end]
    if between:
        print("  file syscalls in the steady passes:", *between[:10], sep="\n    ")
    return len(between)


# -- c. and d. retention ------------------------------------------------------------------------------


class AuditCounter:
    """Counts audit events (``open``, ``os.scandir``, ``os.rename``…) while ``counting`` is set."""

    def __init__(self) -> None:
        self.counting = False
        self.events: collections.Counter[str] = collections.Counter()
        sys.addaudithook(self._hook)

    def _hook(self, event: str, _args: tuple[object, ...]) -> None:
        if self.counting:
            self.events[event] += 1

    def run(self, action: Callable[[], object]) -> tuple[float, collections.Counter[str]]:
        self.events = collections.Counter()
        self.counting = True
        start = time.perf_counter()
        try:
            action()
        finally:
            elapsed = time.perf_counter() - start
            self.counting = False
        return elapsed, self.events


def bench_retention(log_dir: Path, audit: AuditCounter, strace_syscalls: int | None) -> dict[str, float]:
    scheduler = DeferredTasks()
    manager = new_manager(log_dir, KEEP_ALL, scheduler)
    start = time.perf_counter()
    manager.startup()
    print(f"  (start-up in this process, not a target: {time.perf_counter() - start:.2f} s)")
    logs = list(manager.logs.values())
    segments = [s for log in logs for s in log.segments]

    def bare_loop() -> None:
        for segment in segments:
            segment.base_offset  # noqa: B018 - reading one attribute is the work

    bare_s = min(audit.run(bare_loop)[0] for _ in range(STEADY_PASSES))
    first_s, first_events = audit.run(manager.cleanup_logs)
    runs = [audit.run(manager.cleanup_logs) for _ in range(STEADY_PASSES)]
    steady_s = statistics.median(elapsed for elapsed, _ in runs)
    steady_events = sum((events for _, events in runs), collections.Counter[str]())
    if any(deleted for deleted in [manager.cleanup_logs()]):
        raise SystemExit("the keep-all pass deleted segments")
    report(
        "retention",
        f"first pass {first_s * 1000:.1f} ms ({sum(first_events.values()):,} audited I/O events)",
        "loads each log's oldest timestamp",
    )
    strace_note = "strace not run" if strace_syscalls is None else f"strace: {strace_syscalls} file syscalls"
    report(
        "retention",
        f"steady pass {steady_s * 1000:.1f} ms over {len(segments):,} segments; bare loop "
        f"{bare_s * 1000:.1f} ms",
        f"{steady_s / bare_s:.1f}× the bare loop (target ≤ 50 ms)",
    )
    report(
        "no I/O",
        f"{sum(steady_events.values())} audited I/O events in {STEADY_PASSES} steady passes; {strace_note}",
        "must be 0",
    )
    if steady_events or strace_syscalls:
        print(f"  steady-state events: {dict(steady_events)}")

    for log in logs:  # as apply_topic_config does: the next pass sees the new retention.ms
        log.config = EXPIRE_OLDEST

    def dry_run() -> None:
        for log in logs:
            manager.delete_old_segments(log, dry_run=True)

    dry_first_s, dry_first_events = audit.run(dry_run)
    dry_s = statistics.median(audit.run(dry_run)[0] for _ in range(STEADY_PASSES))
    planned = sum(len(manager.delete_old_segments(log, dry_run=True)) for log in logs)
    real_s, real_events = audit.run(manager.cleanup_logs)
    deleted = sum(1 for log in logs for s in log.segments if s.base_offset == 0)
    renamed = sum(len(list(log.directory.glob("*.log.deleted"))) for log in logs[:100])
    if planned != len(logs) or deleted or renamed != min(100, len(logs)):
        raise SystemExit(f"expected {len(logs)} oldest segments to go: {planned} planned, {renamed} renamed")
    rename_s = bench_renames(log_dir.parent / "renames", renames=real_events["os.rename"])
    report(
        "dry run",
        f"first {dry_first_s * 1000:.1f} ms ({sum(dry_first_events.values()):,} audited I/O events: the "
        "second segments' timestamps)",
        "measured",
    )
    report(
        "dry run",
        f"steady {dry_s * 1000:.1f} ms for {planned:,} expired segments in {len(logs):,} logs",
        f"{dry_s / bare_s:.1f}× the bare loop",
    )
    report(
        "real pass",
        f"{real_s:.2f} s, {real_events['os.rename']:,} renames to .deleted; os.replace of as many files "
        f"{rename_s:.2f} s",
        f"{real_s / rename_s:.1f}× the renames",
    )
    manager.release_locks()
    return {"first_s": first_s, "steady_s": steady_s, "bare_s": bare_s, "dry_s": dry_s, "real_s": real_s}


def bench_renames(scratch: Path, renames: int) -> float:
    """``os.replace`` of ``renames`` small files to a ``.deleted`` name: the floor of a real pass."""
    scratch.mkdir()
    names = [str(scratch / f"{n:020d}.log") for n in range(renames)]
    for name in names:
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o644))
    start = time.perf_counter()
    for name in names:
        os.replace(name, name + ".deleted")
    elapsed = time.perf_counter() - start
    shutil.rmtree(scratch)
    return elapsed


def report(what: str, figure: str, ratio: str) -> None:
    print(f"  {what:<10} {figure:<96} {ratio}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--segments", type=int, default=10)
    parser.add_argument("--startup-worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.startup_worker is not None:
        startup_worker(args.startup_worker)
        return
    use_strace = shutil.which("strace") is not None
    audit = AuditCounter()
    print(f"python {sys.version.split()[0]}; strace {'found' if use_strace else 'not found'}")
    with tempfile.TemporaryDirectory(prefix="bench-log-manager-") as tmp:
        start = time.perf_counter()
        log_dir = build_log_dir(Path(tmp), args.partitions, args.segments)
        verify_sample(log_dir, args.partitions, args.segments)
        print(
            f"built {args.partitions:,} partitions × {args.segments} segments in "
            f"{time.perf_counter() - start:.1f} s (not a measured figure)",
            flush=True,
        )
        _, syscalls = bench_startup(log_dir, use_strace)
        bench_retention(log_dir, audit, syscalls)


if __name__ == "__main__":
    main()

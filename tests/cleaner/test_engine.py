"""``log.cleaner.engine`` per round: ``auto`` sends a round to Spark only from ``log.cleaner.spark.min.bytes``
read; small logs are cleaned in-process without ever importing pyspark or starting a JVM."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
import psutil  # type: ignore[import-untyped]  # no stubs installed; used to look for a java child
import pytest

from cleaner.compaction.cleaner import CleaningResult, ScheduleDelete
from cleaner.engine import (
    CompactionEngine,
    InProcessEngine,
    LogRound,
    PerRoundEngine,
    clean_each,
    round_bytes,
)
from cleaner.errors import CleaningAbortedError
from service.base.clock import ManualClock
from service.core.engine_choice import EngineChoice
from service.storage.log import PartitionLog
from tests.cleaner.helpers import keyed, new_log
from tests.paths import REPO
from tests.service.serve_process import READY, Serve


class _NamedSpark:
    """Stands in for the Spark engine (the real one is tested in tests/cleaner/spark): in-process rules,
    reported as ``spark``, so that the choice is visible without a JVM."""

    name = "spark"

    def __init__(self, clock: ManualClock) -> None:
        self.inner = InProcessEngine(clock)
        self.closed = False

    def clean(
        self,
        log: PartitionLog,
        first_dirty_offset: int,
        upper_bound_offset: int,
        *,
        check_aborted: Callable[[], None],
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int = 0,
    ) -> CleaningResult:
        result = self.inner.clean(
            log,
            first_dirty_offset,
            upper_bound_offset,
            check_aborted=check_aborted,
            throttle=throttle,
            schedule_delete=schedule_delete,
        )
        return CleaningResult(result.end_offset, result.stats, self.name)

    def clean_many(
        self,
        rounds: Sequence[LogRound],
        *,
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int = 0,
    ) -> None:
        clean_each(self, rounds, throttle=throttle, schedule_delete=schedule_delete, thread_id=thread_id)

    def close(self) -> None:
        self.closed = True


def _clean(engine: CompactionEngine, log: PartitionLog) -> CleaningResult:
    return engine.clean(
        log,
        0,
        log.log_end_offset,
        check_aborted=lambda: None,
        throttle=lambda _n: None,
        schedule_delete=lambda _delay, _fn: None,
    )


@pytest.mark.parametrize("margin", [1, 0])
def test_spark_is_built_only_when_a_round_reaches_the_threshold(tmp_path: Path, margin: int) -> None:
    clock = ManualClock(1_700_000_000_000)
    log = new_log(tmp_path / "topic-0", clock, segment_bytes=2048)
    for i in range(200):
        log.append_records([keyed(i % 5, i)])
    size = round_bytes(log, log.log_end_offset)
    assert size > 0
    built: list[_NamedSpark] = []

    def build_spark() -> CompactionEngine:
        built.append(_NamedSpark(clock))
        return built[-1]

    engine = PerRoundEngine(EngineChoice("auto", size + margin), InProcessEngine(clock), build_spark)
    result = _clean(engine, log)
    expected = "in-process" if margin else "spark"
    assert result.engine == expected
    assert engine.has_started_spark is (not margin)
    engine.close()
    assert [b.closed for b in built] == ([] if margin else [True])


def test_a_stop_while_spark_starts_aborts_the_round_without_waiting_for_it(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    log = new_log(tmp_path / "topic-0", clock, segment_bytes=2048)
    for i in range(200):
        log.append_records([keyed(i % 5, i)])
    release = threading.Event()
    built: list[_NamedSpark] = []

    def slow_build_spark() -> CompactionEngine:  # a JVM that takes its time to start
        release.wait(30)
        built.append(_NamedSpark(clock))
        return built[-1]

    engine = PerRoundEngine(EngineChoice("spark", 0), InProcessEngine(clock), slow_build_spark)
    stop = threading.Event()

    def check_aborted() -> None:
        if stop.is_set():
            raise CleaningAbortedError("stopping")

    threading.Timer(0.3, stop.set).start()
    began = time.monotonic()
    with pytest.raises(CleaningAbortedError):
        engine.clean(
            log,
            0,
            log.log_end_offset,
            check_aborted=check_aborted,
            throttle=lambda _n: None,
            schedule_delete=lambda _delay, _fn: None,
        )
    assert time.monotonic() - began < 5
    engine.close()  # the service stops while Spark still starts
    release.set()
    deadline = time.monotonic() + 10
    while not (built and built[0].closed) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert built and built[0].closed  # closed once its start ended


def _gen_compacted(log_dir: Path) -> None:
    args = [sys.executable, "-m", "service", "gen", "--log-dir", str(log_dir), "--records", "3000"]
    args += ["--keys", "100", "--value-size", "20", "--batch-size", "50", "--segment-bytes", "16384"]
    args += ["--partitions", "2"]
    args += ["--cleanup-policy", "compact"]
    subprocess.run(args, cwd=REPO, check=True, capture_output=True)


def test_offline_clean_of_small_logs_runs_in_process_and_never_imports_pyspark(tmp_path: Path) -> None:
    """The default engine (auto): every entry says in-process, and pyspark was never imported."""
    _gen_compacted(tmp_path / "logs")
    script = (
        "import json, sys\n"
        "from service.shell.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print(json.dumps({'code': code, 'pyspark': 'pyspark' in sys.modules}))\n"
    )
    args = [sys.executable, "-c", script, "clean", "--json", "--override", f"log.dirs={tmp_path / 'logs'}"]
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=False)
    *document, last = done.stdout.strip().splitlines()
    assert json.loads(last) == {"code": 0, "pyspark": False}, done.stderr
    cleaned = json.loads("\n".join(document))["cleaned"]
    assert len(cleaned) == 2
    assert {entry["engine"] for entry in cleaned} == {"in-process"}
    assert {entry["stats"]["engine"] for entry in cleaned} == {"in-process"}


def test_explain_says_which_engine_a_round_would_use(tmp_path: Path) -> None:
    _gen_compacted(tmp_path / "logs")
    base = [
        sys.executable,
        "-m",
        "service",
        "explain",
        "--json",
        "--override",
        f"log.dirs={tmp_path / 'logs'}",
    ]
    for extra, engine, reason in [
        ([], "in-process", "below-spark-min-bytes"),
        (["--override", "log.cleaner.spark.min.bytes=1"], "spark", "at-or-above-spark-min-bytes"),
        (["--override", "log.cleaner.engine=spark"], "spark", "forced-by-log.cleaner.engine"),
    ]:
        done = subprocess.run([*base, *extra], cwd=REPO, capture_output=True, text=True, check=True)
        cleaners = [p["cleaner"] for p in json.loads(done.stdout)["partitions"]]
        assert [(c["engine"], c["engine_reason"]) for c in cleaners] == [(engine, reason)] * 2


@pytest.mark.slow
def test_serve_cleans_small_logs_in_process_without_a_jvm(tmp_path: Path) -> None:
    _gen_compacted(tmp_path / "logs")
    serve = Serve(tmp_path / "logs", "log.cleaner.backoff.ms=100", "scheduler.initial.delay.ms=3600000")
    try:
        serve.wait_for(READY)
        found = re.search(r"REST API listening on (http://127\.0\.0\.1:\d+)", serve.log)
        assert found, serve.log
        url = found.group(1)
        runs: list[dict[str, object]] = []
        deadline = time.monotonic() + 20
        while len(runs) < 2 and time.monotonic() < deadline:
            runs = httpx.get(f"{url}/v1/cleaner").json()["last_runs"]
            time.sleep(0.1)
        assert {r["engine"] for r in runs} == {"in-process"}, runs
        metrics = httpx.get(f"{url}/metrics").text
        assert re.search(r'^logcleaner_cleaner_rounds_total\{engine="in-process"\} [1-9]', metrics, re.M)
        assert re.search(r'^logcleaner_cleaner_rounds_total\{engine="spark"\} 0\.0$', metrics, re.M)
        forced = httpx.post(f"{url}/v1/cleaner/run", json={"topic": "gen-0", "partition": 0})
        assert forced.status_code == 200, forced.text
        assert [e["engine"] for e in forced.json()["cleaned"]] == ["in-process"]
        children = psutil.Process(serve.proc.pid).children(recursive=True)
        assert not [c for c in children if "java" in c.name()], children
    finally:
        assert serve.stop() == 0, serve.log


def test_spark_that_cannot_start_costs_no_partition_the_rounds_run_in_process(tmp_path: Path) -> None:
    """A JVM that cannot start is the engine's fault: one ERROR naming it, every partition cleaned in-process,
    none marked uncleanable, no traceback."""
    import os

    _gen_compacted(tmp_path / "logs")
    args = [sys.executable, "-m", "service", "clean", "--json", "--override", f"log.dirs={tmp_path / 'logs'}"]
    args += ["--override", "log.cleaner.engine=spark"]
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java-here")}
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=False, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    cleaned = json.loads(done.stdout)["cleaned"]
    assert [entry["engine"] for entry in cleaned] == ["in-process", "in-process"]
    assert "Traceback" not in done.stderr and "uncleanable" not in done.stderr, done.stderr
    [line] = [line for line in done.stderr.splitlines() if "Spark did not start" in line]
    assert str(tmp_path / "no-java-here") in line, line


def test_a_failed_spark_start_is_tried_again_only_after_the_backoff(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    log = new_log(tmp_path / "topic-0", clock, segment_bytes=2048)
    for i in range(200):
        log.append_records([keyed(i % 5, i)])
    starts: list[int] = []

    def no_java() -> CompactionEngine:
        starts.append(1)
        raise FileNotFoundError("java")

    engine = PerRoundEngine(EngineChoice("spark", 0), InProcessEngine(clock), no_java)
    assert engine.engine_for(log, log.log_end_offset) is engine.in_process
    assert not engine.goes_to_spark(log, log.log_end_offset), "not again before SPARK_RETRY_AFTER_S"
    assert engine.engine_for(log, log.log_end_offset) is engine.in_process
    assert len(starts) == 1
    engine.close()


def test_explain_shows_both_estimates_with_a_cluster_master(tmp_path: Path) -> None:
    _gen_compacted(tmp_path / "logs")
    args = [sys.executable, "-m", "service", "explain", "--override", f"log.dirs={tmp_path / 'logs'}"]
    args += ["--override", "spark.master=spark://127.0.0.1:7077", "--override", "spark.cores.max=4"]
    done = subprocess.run([*args, "--json"], cwd=REPO, capture_output=True, text=True, check=True)
    cleaners = [p["cleaner"] for p in json.loads(done.stdout)["partitions"]]
    for cleaner in cleaners:
        assert (cleaner["engine"], cleaner["engine_reason"]) == ("in-process", "in-process-expected-sooner")
        assert set(cleaner["engine_estimates"]) == {"in_process_s", "spark_s"}
    text = subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert "s on the cluster, " in text and "s in-process)" in text


@pytest.mark.slow
def test_a_spark_master_that_does_not_answer_costs_no_partition(tmp_path: Path) -> None:
    """Spark gives up on the master after about a minute: one line of ours names it, the rounds run
    in-process, nothing is marked uncleanable."""
    import socket

    _gen_compacted(tmp_path / "logs")
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    args = [sys.executable, "-m", "service", "clean", "--json", "--override", f"log.dirs={tmp_path / 'logs'}"]
    args += ["--override", "log.cleaner.engine=spark", "--override", f"spark.master=spark://127.0.0.1:{port}"]
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [entry["engine"] for entry in json.loads(done.stdout)["cleaned"]] == ["in-process", "in-process"]
    ours = [line for line in done.stderr.splitlines() if " cleaner.spark.jvm: " not in line and line.strip()]
    assert "Traceback" not in done.stderr and "uncleanable" not in done.stderr, ours
    [line] = [line for line in ours if "Spark did not start" in line]
    assert f"spark.master=spark://127.0.0.1:{port}" in line and "could not be created" in line, line

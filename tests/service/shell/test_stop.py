"""A stop of a real ``serve`` subprocess whatever runs: a cleaner round in flight is aborted and named, a
stop during start-up leaves the next start to recover, and the stop stays bounded."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import httpx
import pytest

from scheduler.log_scheduler import LogScheduler
from service.base.clock import SystemClock
from service.config.topic_store import TopicConfigStore
from service.core.log_manager import LogManager
from service.shell.tools.gen import GenOptions, generate
from service.storage.clean_shutdown import read_clean_shutdown_marker
from service.storage.log_config import LogConfig
from service.storage.topic_partition import TopicPartition
from tests.service.serve_process import READY, Serve, write_log
from tests.service.stop_helpers import (
    api_url,
    copies_of_one_partition,
    fetch_all,
    leftover_cleaner_files,
    records_on_disk,
    wait_until,
)

BIG = TopicPartition("big", 0)


def big_compacted_log(log_dir: Path) -> None:
    """~40 MB in 64 KiB segments (keys drawn from 40,000), cleaned in 1 MiB groups: every group is
    rewritten (it merges). Large enough that even the C engine's round outlasts the throttler's first
    0.3 s check interval (Kafka's ``Throttler`` never slows a round shorter than that)."""
    generate(
        GenOptions(
            log_dir=log_dir,
            topics=(BIG.topic,),
            records=40_000,
            batch_size=50,
            value_size=1000,
            segment_bytes=65_536,
            cleanup_policy=frozenset({"compact"}),
        )
    )
    TopicConfigStore([log_dir]).update(BIG.topic, {"segment.bytes": 1_048_576})


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["in-process", "spark"])
def test_sigterm_aborts_the_round_in_flight_names_it_and_leaves_no_cleaned_file(
    tmp_path: Path, engine: str
) -> None:
    log_dir = tmp_path / "logs"
    big_compacted_log(log_dir)
    expected = records_on_disk(log_dir)[BIG]
    assert len(expected) == 40_000
    serve = Serve(
        log_dir,
        f"log.cleaner.engine={engine}",
        "log.cleaner.io.max.bytes.per.second=10000000",  # a round of about 10 s (Spark: its pause after)
        "scheduler.initial.delay.ms=3600000",
        "spark.master=local[2]",
    )
    partition_dir = log_dir / str(BIG)
    wait_until(
        lambda: any(p.name.endswith(".cleaned") for p in partition_dir.iterdir()),
        "the round writing its first .cleaned segment",
        timeout_s=240,  # Spark starts first
        serve=serve,
    )
    began = time.monotonic()
    assert serve.stop(signal.SIGTERM) == 0, serve.log
    assert time.monotonic() - began < 10, serve.log  # seconds on a busy 2-core machine, not the 30 s bound
    assert f"cleaner stopped (aborted round on {BIG})" in serve.log, serve.log
    assert "Shut down cleanly" in serve.log, serve.log
    assert read_clean_shutdown_marker(log_dir) is not None, serve.log
    assert leftover_cleaner_files(log_dir) == [], serve.log

    restarted = Serve(log_dir, "log.cleaner.enable=false", "scheduler.initial.delay.ms=3600000")
    restarted.wait_for(READY)
    with httpx.Client(base_url=api_url(restarted), timeout=30) as client:
        served = fetch_all(client, BIG.topic, BIG.partition)
    assert restarted.stop() == 0, restarted.log
    # groups swapped in before the abort dropped records a later one of the same key supersedes: every
    # other record is served, and each served one is as written
    latest = {key: offset for offset, (key, _value) in sorted(expected.items())}
    assert {offset: expected[offset] for offset in served} == served
    assert set(latest.values()) <= served.keys()


def loaded_count(url: str) -> int | None:
    """How many logs ``/readyz`` says are loaded, or None once it no longer reports loading."""
    try:
        response = httpx.get(f"{url}/readyz", timeout=5)
    except httpx.HTTPError:
        return None
    found = re.fullmatch(r"loading: ([\d,]+) of [\d,]+ logs", str(response.json().get("detail")))
    return int(found.group(1).replace(",", "")) if found else None


@pytest.mark.slow
def test_sigterm_while_the_logs_load_exits_1_without_the_marker_and_the_next_start_recovers(
    tmp_path: Path,
) -> None:
    log_dir = tmp_path / "logs"
    generate(
        GenOptions(
            log_dir=log_dir, topics=("t",), records=300, batch_size=10, value_size=1000, segment_bytes=32_768
        )
    )
    one = records_on_disk(log_dir)[TopicPartition("t", 0)]
    copies_of_one_partition(log_dir, "t", 150)
    # an unclean stop that lost its recovery points: start-up recovers every segment (a few seconds)
    (log_dir / ".kafka_cleanshutdown").unlink()
    (log_dir / "recovery-point-offset-checkpoint").unlink()
    serve = Serve(log_dir, "log.cleaner.enable=false", "shutdown.timeout.ms=5000")
    url = api_url(serve)
    wait_until(lambda: (loaded_count(url) or 0) > 0, "the first log loaded", serve=serve)
    began = time.monotonic()
    returncode = serve.stop(signal.SIGTERM)
    assert time.monotonic() - began < 6, serve.log
    assert "logcleaner started" not in serve.log, "the load ended before the signal: too fast a disk?"
    assert returncode == 1, serve.log
    errors = [line for line in serve.lines if line.startswith("logcleaner: error")]
    assert len(errors) == 1 and "start-up interrupted by a stop signal" in errors[0], serve.log
    assert read_clean_shutdown_marker(log_dir) is None

    restarted = Serve(log_dir, "log.cleaner.enable=false", "scheduler.initial.delay.ms=3600000")
    restarted.wait_for(READY)
    assert "150 logs loaded (150 recovered)" in restarted.log
    with httpx.Client(base_url=api_url(restarted), timeout=30) as client:
        served = {p: fetch_all(client, "t", p) for p in range(150)}
    assert restarted.stop() == 0, restarted.log
    assert served == {p: one for p in range(150)}


def test_a_retention_pass_ends_early_once_the_stop_began(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    write_log(log_dir, 40)  # 1970 timestamps: time retention deletes every closed segment

    def manager() -> LogManager:
        clock = SystemClock()
        built = LogManager(
            [log_dir],
            lambda _topic: LogConfig(segment_bytes=500),
            clock=clock,
            scheduler=LogScheduler(clock, initial_delay_ms=0),
        )
        built.startup()
        return built

    stopping = manager()
    stopping.begin_stop()
    assert stopping.cleanup_logs() == []
    stopping.shutdown()
    running = manager()
    assert running.cleanup_logs() != []  # the same pass without a stop deletes
    running.shutdown()

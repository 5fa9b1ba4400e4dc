"""SIGTERM a real ``serve`` at random moments while everything runs at once, round after round.

The log dir: ``old`` (a few hundred partitions whose segments carry 1970 timestamps: time retention
deletes every closed one, and produces of more such records keep it busy), ``c`` (compacted partitions,
dirty enough that the throttled cleaner always has a round running). Each round starts ``serve``, streams
produces in over HTTP, and sends SIGTERM at a random moment. Each stop must be clean (exit 0) within
``shutdown.timeout.ms``, leave no ``.cleaned``/``.swap`` file, and the next start must serve every
acknowledged record of ``c`` and never bring back a segment of ``old`` that retention had deleted (no log
start offset goes back). The seed is logged; ``LOGCLEANER_STOP_SEED`` replays a run and
``LOGCLEANER_STOP_ROUNDS`` sets the number of in-process rounds: 50 by default (about four minutes on an
idle 2-core machine: a round costs ~5 s, mostly the interpreter's start-up), plus two on Spark.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.service.serve_process import READY, Serve
from tests.service.stop_helpers import (
    Acknowledged,
    api_url,
    fetch_all,
    leftover_cleaner_files,
    produce_until,
    workload,
)

logger = logging.getLogger(__name__)

TIMEOUT_MS = 15_000
IN_PROCESS_ROUNDS = int(os.environ.get("LOGCLEANER_STOP_ROUNDS", "50"))
SPARK_ROUNDS = 2


def check_restart(client: httpx.Client, acked: Acknowledged, seed: int) -> None:
    """Every acknowledged record of ``c`` is served; no log start offset of ``old`` went back."""
    for partition, records in acked.records.items():
        if not records:
            continue
        served = fetch_all(client, "c", partition, start=min(records))
        missing = {o: r for o, r in records.items() if served.get(o) != r}
        assert not missing, f"seed {seed}: c-{partition} lost acknowledged records {sorted(missing)[:10]}"
    detail = client.get("/v1/topics/old").json()
    now = {part["partition"]: part["log_start_offset"] for part in detail["partitions"]}
    back = {p: (was, now[p]) for p, was in acked.old_start_offsets.items() if now[p] < was}
    assert not back, f"seed {seed}: deleted segments came back (log start offset was, is): {back}"


def run_rounds(log_dir: Path, rounds: int, engine: str, seed: int, *, max_delay_s: float = 3.0) -> None:
    """``rounds`` starts, each stopped by SIGTERM ``max_delay_s`` at most after it is ready; one more
    start checks the last."""
    rng = random.Random(seed)
    acked = Acknowledged()
    caught: dict[str, int] = {"aborted round": 0, "Retention pass ended early": 0}
    overrides = (
        f"log.cleaner.engine={engine}",
        "log.cleaner.io.max.bytes.per.second=2000000",
        "log.retention.check.interval.ms=500",
        "scheduler.initial.delay.ms=0",
        f"shutdown.timeout.ms={TIMEOUT_MS}",
        "spark.master=local[2]",
    )
    for round_no in range(rounds + 1):
        serve = Serve(log_dir, *overrides)
        serve.wait_for(READY, timeout_s=120)
        url = api_url(serve)
        with httpx.Client(base_url=url, timeout=30) as client:
            check_restart(client, acked, seed)
            if round_no == rounds:  # the last start only checks
                assert serve.stop() == 0, f"seed {seed}\n{serve.log}"
                logger.warning("%d rounds; stops that caught work in flight: %s", rounds, caught)
                assert sum(len(r) for r in acked.records.values()) > 0, "no produce was acknowledged"
                return
            stop_producing = threading.Event()
            producer = threading.Thread(
                target=produce_until,
                args=(stop_producing, url, acked, random.Random(rng.random()), f"r{round_no}"),
                daemon=True,
            )
            producer.start()
            time.sleep(rng.uniform(0, max_delay_s))
            acked.see_start_offsets(client)
        began = time.monotonic()
        returncode = serve.stop(signal.SIGTERM)
        took = time.monotonic() - began
        stop_producing.set()
        producer.join(15)
        assert returncode == 0, f"seed {seed}, round {round_no}: exit {returncode}\n{serve.log}"
        assert took < TIMEOUT_MS / 1000, f"seed {seed}, round {round_no}: stop took {took:.1f} s"
        assert leftover_cleaner_files(log_dir) == [], f"seed {seed}, round {round_no}"
        caught.update((what, count + (what in serve.log)) for what, count in caught.items())


def _seed() -> int:
    seed = int(os.environ.get("LOGCLEANER_STOP_SEED", str(random.SystemRandom().randrange(2**32))))
    logger.warning("LOGCLEANER_STOP_SEED=%d (replays this run)", seed)
    return seed


@pytest.mark.slow
def test_sigterm_at_random_moments_in_process(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    workload(log_dir)
    run_rounds(log_dir, IN_PROCESS_ROUNDS, "in-process", _seed())


@pytest.mark.slow
def test_sigterm_at_random_moments_spark(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    workload(log_dir)
    run_rounds(log_dir, SPARK_ROUNDS, "spark", _seed(), max_delay_s=20.0)  # Spark starts in ~10 s

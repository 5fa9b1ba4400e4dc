"""SIGKILL a real ``serve`` at random moments while produces, compaction, retention, DeleteRecords and
fetches run at once, round after round; nothing acknowledged is lost and every read is consistent.

The log dir is ``test_stop_random``'s, smaller: ``old`` (partitions of 1970 records that time retention
deletes) and ``c`` (``compact,delete``, unique keys, so compaction keeps every record), with
``file.delete.delay.ms=0`` so replaced and expired segments vanish while fetches may still hold them.
Each round starts ``serve`` (a recovery: the last one was killed), checks what the previous rounds were
told, then produces, deletes records and fetches until a SIGKILL at a random moment. After each start:

- every acknowledged record of ``c`` at or above its log start offset is served with its content, and a
  log start offset above an acknowledged record is explained by an acknowledged DeleteRecords (Kafka
  writes the log start offset to its checkpoint periodically, so one may go back after a kill, and then
  the records it had passed are served again: with their acknowledged content);
- no log start offset of ``old`` goes back (retention's deletions are renames, done before a kill);
- no fetch during the rounds answered 5xx or served a record other than the one acknowledged at its
  offset, and offsets only increase within a fetch.

``LOGCLEANER_KILL_SEED`` replays a run; ``LOGCLEANER_KILL_ROUNDS`` sets the number of kills (6: ≈ 40 s
on an idle 2-core machine).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from service.config.topic_store import TopicConfigStore
from tests.service.serve_process import READY, Serve
from tests.service.stop_helpers import (
    COMPACTED_PARTITIONS,
    Acknowledged,
    api_url,
    fetch_all,
    produce_until,
    workload,
)

logger = logging.getLogger(__name__)

OLD_PARTITIONS = 20
ROUNDS = int(os.environ.get("LOGCLEANER_KILL_ROUNDS", "6"))
OVERRIDES = (
    "log.cleaner.engine=in-process",
    "log.cleaner.io.max.bytes.per.second=2000000",
    "log.retention.check.interval.ms=300",
    "log.segment.delete.delay.ms=0",
    "scheduler.initial.delay.ms=0",
)


@dataclass
class Observed:
    """DeleteRecords acknowledged (the highest ``before_offset`` per ``c`` partition) and what went wrong
    in the fetches made while everything ran."""

    deleted_before: dict[int, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    fetches: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def delete_records_until(
    stop: threading.Event, url: str, acked: Acknowledged, observed: Observed, rng: random.Random
) -> None:
    """DeleteRecords on ``c`` up to an acknowledged offset in the lower half of what was produced."""
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.wait(rng.uniform(0.1, 0.4)):
            partition = rng.randrange(COMPACTED_PARTITIONS)
            with acked.lock:
                offsets = sorted(acked.records[partition])
            if not offsets:
                continue
            target = offsets[rng.randrange(len(offsets) // 2 + 1)]
            try:
                response = client.post(
                    f"/v1/topics/c/partitions/{partition}/delete-records", json={"before_offset": target}
                )
            except httpx.HTTPError:
                continue
            if response.status_code == 200:
                with observed.lock:
                    seen = observed.deleted_before.get(partition, 0)
                    observed.deleted_before[partition] = max(seen, target)


def fetch_until(
    stop: threading.Event, url: str, acked: Acknowledged, observed: Observed, rng: random.Random
) -> None:
    """Fetch ``c`` from its log start over and over; record a 5xx, an offset out of order, or a record
    that differs from the one acknowledged at its offset."""
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.is_set():
            partition = rng.randrange(COMPACTED_PARTITIONS)
            try:
                response = client.get(f"/v1/topics/c/partitions/{partition}/records?max_records=2000")
            except httpx.HTTPError:
                continue
            problems = []
            if response.status_code >= 500:
                problems.append(f"fetch of c-{partition}: {response.status_code} {response.text}")
            elif response.status_code == 200:
                served = [
                    (r["offset"], (r["key"] and r["key"]["data"], r["value"] and r["value"]["data"]))
                    for r in response.json()["records"]
                ]
                offsets = [offset for offset, _ in served]
                if offsets != sorted(set(offsets)):
                    problems.append(f"fetch of c-{partition}: offsets out of order {offsets[:20]}")
                with acked.lock:
                    known = acked.records[partition]
                    problems += [
                        f"c-{partition} offset {o}: served {r}, acknowledged {known[o]}"
                        for o, r in served
                        if o in known and known[o] != r
                    ]
            with observed.lock:
                observed.fetches += 1
                observed.problems += problems


def check_restart(client: httpx.Client, acked: Acknowledged, observed: Observed, seed: int) -> None:
    detail = {p["partition"]: p for p in client.get("/v1/topics/c").json()["partitions"]}
    for partition, records in acked.records.items():
        end = detail[partition]["log_end_offset"]
        assert all(o < end for o in records), f"seed {seed}: c-{partition} ends at {end}, below acknowledged"
        # logcleaner leads its own logs alone: the high watermark is the log end at load (Kafka's
        # Partition.makeLeader), so every acknowledged record is served before anything new is produced.
        assert detail[partition]["high_watermark"] == end, f"seed {seed}: c-{partition} {detail[partition]}"
        start = detail[partition]["log_start_offset"]
        served = fetch_all(client, "c", partition)
        wrong = sorted(o for o, r in records.items() if o >= start and served.get(o) != r)
        assert not wrong, (
            f"seed {seed}: c-{partition} (log start {start}, {len(served)} records served from "
            f"{min(served, default=None)} to {max(served, default=None)}) lost or changed "
            f"{len(wrong)} acknowledged records: {wrong[:5]}...{wrong[-5:]}"
        )
        passed = [o for o in records if o < start]
        explained = observed.deleted_before.get(partition, 0)
        assert not passed or start <= explained, (
            f"seed {seed}: c-{partition} starts at {start}, past acknowledged records {passed[:10]}, "
            f"but DeleteRecords was acknowledged up to {explained} only"
        )
    now = {p["partition"]: p["log_start_offset"] for p in client.get("/v1/topics/old").json()["partitions"]}
    back = {p: (was, now[p]) for p, was in acked.old_start_offsets.items() if now[p] < was}
    assert not back, f"seed {seed}: deleted segments came back (log start offset was, is): {back}"


@pytest.mark.slow
def test_sigkill_while_producing_compacting_retaining_and_deleting_records(tmp_path: Path) -> None:
    seed = int(os.environ.get("LOGCLEANER_KILL_SEED", str(random.SystemRandom().randrange(2**32))))
    logger.warning("LOGCLEANER_KILL_SEED=%d (replays this run)", seed)
    rng = random.Random(seed)
    log_dir = tmp_path / "logs"
    workload(log_dir, old_partitions=OLD_PARTITIONS, compacted_records=4_000)
    # compact,delete: DeleteRecords needs "delete" in the policy (Kafka refuses it on a compact-only topic).
    configs = {
        "min.cleanable.dirty.ratio": "0.01",
        "segment.bytes": "16384",
        "cleanup.policy": "compact,delete",
    }
    TopicConfigStore([log_dir]).update("c", configs)
    acked, observed = Acknowledged(), Observed()
    logs: list[str] = []
    for round_no in range(ROUNDS + 1):
        serve = Serve(log_dir, *OVERRIDES)
        serve.wait_for(READY, timeout_s=60)
        url = api_url(serve)
        with httpx.Client(base_url=url, timeout=30) as client:
            check_restart(client, acked, observed, seed)
        if round_no == ROUNDS:
            assert serve.stop() == 0, f"seed {seed}\n{serve.log}"
            break
        stop = threading.Event()
        workers = start_workers(stop, url, acked, observed, rng, f"r{round_no}")
        with httpx.Client(base_url=url, timeout=10) as client:
            deadline = time.monotonic() + rng.uniform(0.5, 3.0)
            while time.monotonic() < deadline:
                acked.see_start_offsets(client)
                time.sleep(0.2)
        assert serve.stop(signal.SIGKILL) == -signal.SIGKILL
        logs.append(serve.log)
        stop.set()
        for worker in workers:
            worker.join(15)
    with observed.lock:
        assert not observed.problems, f"seed {seed}: {observed.problems[:10]}"
        assert observed.fetches > 0 and observed.deleted_before, "the fetches and DeleteRecords ran"
    assert sum(len(r) for r in acked.records.values()) > 0, "no produce was acknowledged"
    for done in ("cleaned log c-", "Deleting segment", "due to client delete records request"):
        assert any(done in log for log in logs), f"seed {seed}: no {done!r} in any round"


def start_workers(
    stop: threading.Event, url: str, acked: Acknowledged, observed: Observed, rng: random.Random, tag: str
) -> list[threading.Thread]:
    """A producer (``c`` and ``old``), a DeleteRecords caller and a fetcher, each with its own seed."""
    targets: list[tuple[Callable[..., None], tuple[object, ...]]] = [
        (produce_until, (stop, url, acked, random.Random(rng.random()), tag, OLD_PARTITIONS)),
        (delete_records_until, (stop, url, acked, observed, random.Random(rng.random()))),
        (fetch_until, (stop, url, acked, observed, random.Random(rng.random()))),
    ]
    workers = [threading.Thread(target=target, args=args, daemon=True) for target, args in targets]
    for worker in workers:
        worker.start()
    return workers

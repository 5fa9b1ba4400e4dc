"""Produce and fetch racing a topic delete and re-create, on a real server.

The probe's race: a produce that looked up ``rt/0`` just before a delete appended after it, through a
segment that reopened its file by path, into the re-created topic's ``.log``; the API then answered 500s
and a restart brought the deleted topic back. Here producers, a fetcher and a deleter that deletes and
re-creates the topic run in threads for a few seconds. No answer may be a 5xx; after a restart the topic's
files hold only whole, valid batches, every record in them was acknowledged at that very offset, and every
record acknowledged for a request sent after the last re-create is there.
"""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from service.base.clock import ManualClock
from service.core.log_manager import LogManager
from service.core.tasks import ManualTaskScheduler
from service.storage.log_config import LogConfig
from service.storage.topic_partition import TopicPartition
from tests.api.conftest import serve_daemon, string_record

TOPIC = "rt"
CHURN_SECONDS = float(os.environ.get("LOGCLEANER_RACE_SECONDS", "2.5"))  # set it higher to soak
TAIL_SECONDS = 0.5  # producers go on after the last re-create
MIN_ROUNDS = 3  # delete/re-create rounds the churn runs at the least, however loaded the machine
# A large request keeps a produce between its log lookup and its append for a while (the probe's window);
# small ones make many requests.
RECORDS_PER_REQUEST = {"large-1": 5000, "large-2": 5000, "small": 50}
PATH = f"/v1/topics/{TOPIC}/partitions/0/records"
ALLOWED = {
    "produce": {200, 404},
    "fetch": {200, 404, 416},
    "delete": {202},
    "create": {201},
}


@dataclass
class Ack:
    sent_at: float
    offsets: list[int]
    values: list[str]


@dataclass
class Outcomes:
    lock: threading.Lock = field(default_factory=threading.Lock)
    statuses: list[tuple[str, int, str]] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    rounds: int = 0
    last_created_at: float = 0.0
    errors: list[BaseException] = field(default_factory=list)

    def answer(self, kind: str, response: httpx.Response) -> None:
        with self.lock:
            self.statuses.append((kind, response.status_code, response.text[:300]))


def _producer(base_url: str, name: str, stop_at: float, out: Outcomes) -> None:
    padding = "x" * 80
    seq = 0
    with httpx.Client(base_url=base_url, timeout=30) as client:
        while time.monotonic() < stop_at:
            values = [f"{name}-{seq}-{i}-{padding}" for i in range(RECORDS_PER_REQUEST[name])]
            seq += 1
            sent_at = time.monotonic()
            response = client.post(PATH, json={"records": [string_record(None, v) for v in values]})
            out.answer("produce", response)
            if response.status_code == 200:
                with out.lock:
                    out.acks.append(Ack(sent_at, response.json()["offsets"], values))


def _fetcher(base_url: str, stop_at: float, out: Outcomes) -> None:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        while time.monotonic() < stop_at:
            offset = random.choice([0, 0, 100, 1000])
            out.answer("fetch", client.get(PATH, params={"offset": offset, "max_records": 200}))


def _deleter(base_url: str, stop_at: float, out: Outcomes) -> None:
    """Deletes and re-creates until ``stop_at``, and at least MIN_ROUNDS times (a loaded machine)."""
    with httpx.Client(base_url=base_url, timeout=30) as client:
        while time.monotonic() < stop_at or out.rounds < MIN_ROUNDS:
            out.answer("delete", client.delete(f"/v1/topics/{TOPIC}"))
            out.answer("create", client.post("/v1/topics", json={"name": TOPIC, "partitions": 1}))
            with out.lock:
                out.last_created_at = time.monotonic()
                out.rounds += 1
            time.sleep(random.uniform(0, 0.02))


def _guarded(target: object, *args: object) -> threading.Thread:
    out = args[-1]
    assert isinstance(out, Outcomes)

    def run() -> None:
        try:
            target(*args)  # type: ignore[operator]
        except BaseException as exc:  # reported by the test
            with out.lock:
                out.errors.append(exc)

    return threading.Thread(target=run, daemon=True)


@pytest.mark.slow
def test_produce_fetch_delete_recreate_race(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    out = Outcomes()
    with serve_daemon(log_dir) as served:
        assert served.client.post("/v1/topics", json={"name": TOPIC, "partitions": 1}).status_code == 201
        base_url = str(served.client.base_url)
        start = time.monotonic()
        churn_end = start + CHURN_SECONDS
        end = churn_end + TAIL_SECONDS
        threads = [
            _guarded(_deleter, base_url, churn_end, out),
            _guarded(_fetcher, base_url, end, out),
            *(_guarded(_producer, base_url, name, end, out) for name in RECORDS_PER_REQUEST),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        assert not out.errors, out.errors
        # One produce after the churn, so the restart below always has an acknowledged record to find
        # (on a loaded machine the producers' own last requests may all have come before the last create).
        last = [f"last-{i}" for i in range(3)]
        sent_at = time.monotonic()
        response = served.client.post(PATH, json={"records": [string_record(None, v) for v in last]})
        assert response.status_code == 200, response.text
        out.acks.append(Ack(sent_at, response.json()["offsets"], last))

    server_errors = [s for s in out.statuses if s[1] >= 500]
    assert not server_errors, server_errors[:5]
    unexpected = [s for s in out.statuses if s[1] not in ALLOWED[s[0]]]
    assert not unexpected, unexpected[:5]
    assert out.rounds >= MIN_ROUNDS, f"only {out.rounds} delete/re-create rounds ran"

    clock = ManualClock(time.time_ns() // 1_000_000)
    manager = LogManager(
        [log_dir], lambda topic: LogConfig(), clock=clock, scheduler=ManualTaskScheduler(clock)
    )
    manager.startup()
    try:
        log = manager.get_log(TopicPartition(TOPIC, 0))
        for segment in log.segments:  # whole valid batches only: no zeros, no foreign bytes
            batches = list(segment.batches(verify_crc=True))
            assert sum(b.size_bytes for b in batches) == segment.log_path.stat().st_size, segment
        stored = {r.offset: (r.value or b"").decode() for r in log.read(0, max_records=10**7)}
    finally:
        manager.shutdown()

    acked_at = {v: o for ack in out.acks for o, v in zip(ack.offsets, ack.values, strict=True)}
    for offset, value in stored.items():
        assert acked_at.get(value) == offset, f"offset {offset}: {value[:20]!r} not acked there"
    after_last_create = [ack for ack in out.acks if ack.sent_at > out.last_created_at]
    assert after_last_create, "no produce after the last re-create"
    for ack in after_last_create:
        for offset, value in zip(ack.offsets, ack.values, strict=True):
            assert stored.get(offset) == value, f"acknowledged offset {offset} lost"

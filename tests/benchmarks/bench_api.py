"""REST API benchmark (issue 5): produce and fetch over HTTP against the same work done directly.

Run on demand (not part of CI's pass/fail):

    python tests/benchmarks/bench_api.py [--requests 400] [--clients 1 --clients 4]

``logcleaner serve`` runs in a subprocess (one uvicorn worker, as in production); this process is the
HTTP client (httpx, keep-alive), so client and server do not share an interpreter. Each produce request
carries 500 records (key ``key-NNNNNNN`` as STRING, a 100-byte value as BINARY/base64); each fetch asks
for 500 records and parses the JSON answer. In the same run, the baseline appends the same records
directly through ``PartitionLog.append_records`` (500 a batch) and reads them back with
``PartitionLog.read`` — what the API adds is HTTP, JSON and base64. Target: produce ≥ 50k records/s.

One more line times ``GET /v1/topics/{t}/partitions/{p}`` on a partition of ``--document-batches``
one-record batches (written before the server starts): its first GET (each segment counts its records
once), then the median of the next ones (O(segments)), against reading every batch header of the same
log once, which is what each GET cost before the core kept the counts.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from service.base.clock import SystemClock
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record

REPO = Path(__file__).resolve().parents[2]
RECORDS_PER_REQUEST = 500
VALUE_BYTES = 100
DISTINCT_REQUESTS = 32
TARGET_PRODUCE_PER_S = 50_000


def make_requests(now_ms: int) -> list[list[Record]]:
    rng = random.Random(5)
    values = os.urandom(VALUE_BYTES * 1024)
    requests = []
    for _ in range(DISTINCT_REQUESTS):
        records = []
        for _ in range(RECORDS_PER_REQUEST):
            start = rng.randrange(len(values) - VALUE_BYTES)
            key = b"key-%07d" % rng.randrange(1_000_000)
            records.append(Record(0, now_ms - rng.randrange(1000), key, values[start : start + VALUE_BYTES]))
        requests.append(records)
    return requests


def request_body(records: list[Record]) -> bytes:
    return json.dumps(
        {
            "records": [
                {
                    "key": {"type": "STRING", "data": (r.key or b"").decode()},
                    "value": {"type": "BINARY", "data": base64.b64encode(r.value or b"").decode()},
                    "timestamp": r.timestamp,
                }
                for r in records
            ]
        }
    ).encode()


class Server:
    """``logcleaner serve`` on a free port, in a subprocess."""

    def __init__(self, log_dir: Path) -> None:
        overrides = {
            "log.dirs": str(log_dir),
            "api.port": "0",
            "scheduler.initial.delay.ms": "3600000",
            "log.cleaner.enable": "false",
        }
        args = [sys.executable, "-m", "service", "-v", "serve"]
        for key, value in overrides.items():
            args += ["--override", f"{key}={value}"]
        self.proc = subprocess.Popen(
            args, cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
        )
        self.url = self._wait_for_url()
        threading.Thread(target=self._drain, daemon=True).start()

    def _wait_for_url(self) -> str:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            found = re.search(r"REST API listening on (http://\S+)", line)
            if found:
                return found.group(1)
        raise RuntimeError(f"serve exited with {self.proc.wait()} before listening")

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for _ in self.proc.stderr:
            pass

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


def timed(work: Callable[[], int]) -> tuple[int, float]:
    start = time.perf_counter()
    count = work()
    return count, time.perf_counter() - start


def run_clients(clients: int, work: Callable[[int], int]) -> tuple[int, float]:
    """``work(i)`` on ``clients`` threads at once; total count and wall time."""
    counts = [0] * clients

    def one(i: int) -> None:
        counts[i] = work(i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts), time.perf_counter() - start


def bench_http(url: str, requests: list[list[Record]], total: int, clients: int) -> dict[str, float]:
    bodies = [request_body(r) for r in requests]
    topic = f"bench-{clients}"
    with httpx.Client(base_url=url, timeout=120) as admin:
        assert admin.post("/v1/topics", json={"name": topic, "partitions": clients}).status_code == 201
    per_client = total // clients

    def produce(i: int) -> int:
        path = f"/v1/topics/{topic}/partitions/{i}/records"
        headers = {"content-type": "application/json"}
        with httpx.Client(base_url=url, timeout=120) as client:
            for n in range(per_client):
                response = client.post(path, content=bodies[(n + i) % len(bodies)], headers=headers)
                if response.status_code != 200:
                    raise RuntimeError(response.text)
        return per_client * RECORDS_PER_REQUEST

    def fetch(i: int) -> int:
        path = f"/v1/topics/{topic}/partitions/{i}/records"
        fetched, offset = 0, 0
        with httpx.Client(base_url=url, timeout=120) as client:
            while True:
                page = json.loads(client.get(path, params={"offset": offset, "max_records": 500}).content)
                if not page["records"]:
                    return fetched
                fetched += len(page["records"])
                offset = page["next_offset"]

    produced, produce_s = run_clients(clients, produce)
    fetched, fetch_s = run_clients(clients, fetch)
    assert fetched == produced, (fetched, produced)
    body_bytes = sum(len(b) for b in bodies) / len(bodies)
    return {
        "produce": produced / produce_s,
        "produce_mib": per_client * clients * body_bytes / produce_s / 2**20,
        "fetch": fetched / fetch_s,
    }


def bench_direct(directory: Path, requests: list[list[Record]], total: int) -> dict[str, float]:
    log: PartitionLog = load_partition_log(directory, LogConfig(), clock=SystemClock()).log

    def append() -> int:
        for n in range(total):
            log.append_records(requests[n % len(requests)])
        return total * RECORDS_PER_REQUEST

    def read() -> int:
        offset, count = 0, 0
        while True:
            records = log.read(offset, RECORDS_PER_REQUEST)
            if not records:
                return count
            count += len(records)
            offset = records[-1].offset + 1

    appended, append_s = timed(append)
    read_count, read_s = timed(read)
    log.close()
    return {"produce": appended / append_s, "fetch": read_count / read_s}


DOCUMENT_TOPIC = "document"
DOCUMENT_SEGMENT_BYTES = 1_048_576
DOCUMENT_GETS = 20


def write_many_batches(partition_dir: Path, batches: int, now_ms: int) -> float:
    """``batches`` one-record batches in ``partition_dir``; returns the seconds one read of every batch
    header takes (a GET's cost before the counts were kept)."""
    partition_dir.mkdir(parents=True)
    config = LogConfig(segment_bytes=DOCUMENT_SEGMENT_BYTES)
    log: PartitionLog = load_partition_log(partition_dir, config, clock=SystemClock()).log
    for i in range(batches):
        log.append_records([Record(0, now_ms, b"key-%07d" % i, b"v" * VALUE_BYTES)])
    log.flush()
    start = time.perf_counter()
    counted = sum(b.records_count for segment in log.segments for b in segment.batches())
    every_header_s = time.perf_counter() - start
    assert counted == batches, (counted, batches)
    log.close()
    return every_header_s


def bench_document(url: str, batches: int) -> tuple[float, float, int]:
    """The first GET of the partition document and the median of the next ones, in seconds, and its
    segment count."""
    path = f"/v1/topics/{DOCUMENT_TOPIC}/partitions/0"
    with httpx.Client(base_url=url, timeout=120) as client:
        while client.get("/readyz").status_code != 200:  # the API binds before the logs load
            time.sleep(0.1)
        start = time.perf_counter()
        first = client.get(path)
        first_s = time.perf_counter() - start
        document = first.json()
        assert first.status_code == 200, first.text
        assert sum(s["record_count"] for s in document["segments"]) == batches, document
        times = []
        for _ in range(DOCUMENT_GETS):
            start = time.perf_counter()
            assert client.get(path).status_code == 200
            times.append(time.perf_counter() - start)
    return first_s, statistics.median(times), len(document["segments"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="produce requests of 500 records each")
    parser.add_argument("--clients", type=int, action="append", help="concurrent HTTP clients (repeatable)")
    parser.add_argument(
        "--document-batches", type=int, default=50_000, help="batches of the partition whose document is read"
    )
    args = parser.parse_args()
    clients_list = args.clients or [1, 4]
    requests = make_requests(SystemClock().now_ms())
    total = args.requests
    with tempfile.TemporaryDirectory(prefix="logcleaner-bench-api-") as tmp:
        root = Path(tmp)
        (root / "direct-0").mkdir()
        direct = bench_direct(root / "direct-0", requests, total)
        print(
            f"direct PartitionLog: append {direct['produce']:,.0f} records/s, read {direct['fetch']:,.0f}/s"
        )
        every_header_s = write_many_batches(
            root / "logs" / f"{DOCUMENT_TOPIC}-0", args.document_batches, SystemClock().now_ms()
        )
        server = Server(root / "logs")
        try:
            first_s, next_s, segments = bench_document(server.url, args.document_batches)
            print(
                f"GET partition document, {args.document_batches:,} batches in {segments} segments: "
                f"first {first_s * 1000:.1f} ms, then {next_s * 1000:.2f} ms (median of {DOCUMENT_GETS}); "
                f"reading every batch header, as each GET did before: {every_header_s * 1000:.1f} ms"
            )
            for clients in clients_list:
                http = bench_http(server.url, requests, total, clients)
                produce_ok = "✔" if http["produce"] >= TARGET_PRODUCE_PER_S else "✘"
                print(
                    f"HTTP, {clients} client(s): produce {http['produce']:,.0f} records/s "
                    f"({http['produce_mib']:.1f} MiB/s of JSON; "
                    f"{http['produce'] / direct['produce']:.2f}× direct; "
                    f"target ≥ {TARGET_PRODUCE_PER_S:,} {produce_ok}), fetch {http['fetch']:,.0f} records/s "
                    f"({http['fetch'] / direct['fetch']:.2f}× direct)"
                )
        finally:
            server.stop()


if __name__ == "__main__":
    main()

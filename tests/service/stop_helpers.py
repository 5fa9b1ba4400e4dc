"""Helpers of the stop tests: a ``serve`` subprocess's URL, every record of a partition over HTTP, and the
files a stop must never leave behind."""

from __future__ import annotations

import base64
import random
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from service.base.clock import SystemClock
from service.config.topic_store import TopicConfigStore
from service.shell.tools.gen import GenOptions, generate
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.log_files import CLEANED_SUFFIX, REPLICATION_OFFSET_CHECKPOINT, SWAP_SUFFIX
from service.storage.topic_partition import TopicPartition
from tests.service.serve_process import Serve

__all__ = [
    "copies_of_one_partition",
    "api_url",
    "fetch_all",
    "leftover_cleaner_files",
    "records_on_disk",
    "wait_until",
]

Served = dict[int, tuple[str | None, str | None]]
"""offset → (key, value), base64 as the API serves them."""


def api_url(serve: Serve, timeout_s: float = 30.0) -> str:
    """The URL ``serve`` logged as ``REST API listening on …``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = re.search(r"REST API listening on (http://127\.0\.0\.1:\d+)", serve.log)
        if found:
            return found.group(1)
        time.sleep(0.02)
    raise AssertionError(f"serve logged no URL within {timeout_s} s:\n{serve.log}")


def wait_until(
    check: Callable[[], bool], what: str, timeout_s: float = 30.0, *, serve: Serve | None = None
) -> None:
    """Poll ``check()`` until it is true; fail naming ``what`` (and showing ``serve``'s log)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        if serve is not None and serve.proc.poll() is not None:
            raise AssertionError(f"serve exited with {serve.proc.returncode} before {what}:\n{serve.log}")
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}" + (f":\n{serve.log}" if serve else ""))


def fetch_all(client: httpx.Client, topic: str, partition: int, start: int | None = None) -> Served:
    """Every record the API serves from the partition (from ``start``; else from its log start)."""
    out: Served = {}
    offset = start
    while True:
        params = {"max_records": 10_000} | ({} if offset is None else {"offset": offset})
        response = client.get(f"/v1/topics/{topic}/partitions/{partition}/records", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        for record in body["records"]:
            key, value = record["key"], record["value"]
            out[record["offset"]] = (key and key["data"], value and value["data"])
        if body["next_offset"] >= body["high_watermark"] or not body["records"]:
            return out
        offset = body["next_offset"]


def leftover_cleaner_files(log_dir: Path) -> list[str]:
    """``.cleaned`` and ``.swap`` files under ``log_dir``: a stopped round must leave none."""
    suffixes = (CLEANED_SUFFIX, SWAP_SUFFIX)
    return sorted(str(p.relative_to(log_dir)) for p in log_dir.rglob("*") if p.name.endswith(suffixes))


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def records_on_disk(log_dir: Path) -> dict[TopicPartition, Served]:
    """Every record of every partition, read from the files (a load and a clean close, as ``gen`` leaves
    them)."""
    loaded = load_log_dir(log_dir, lambda _topic: LogConfig(), clock=SystemClock())
    try:
        out: dict[TopicPartition, Served] = {}
        for tp, log in loaded.logs.items():
            served: Served = out.setdefault(tp, {})
            offset = log.log_start_offset
            while offset < log.log_end_offset:
                records = log.read(offset, 10_000)
                if not records:
                    break
                served.update((r.offset, (_b64(r.key), _b64(r.value))) for r in records)
                offset = records[-1].offset + 1
        return out
    finally:
        close_log_dir(loaded)


def copies_of_one_partition(log_dir: Path, topic: str, partitions: int) -> None:
    """Copy ``<topic>-0`` to ``<topic>-1`` … ``<topic>-<partitions - 1>`` (one topic: one topic id).

    Many partitions at the cost of one: ``gen`` fsyncs every segment it rolls, which dominates a test that
    needs hundreds of partitions. The copies have no recovery point, so the next load recovers them. Each
    gets the original's line in ``replication-offset-checkpoint``, as a broker lists every partition of its
    dir there (an unlisted one would start at high watermark 0: nothing of it served, retained or cleaned)."""
    source = log_dir / f"{topic}-0"
    for partition in range(1, partitions):
        shutil.copytree(source, log_dir / f"{topic}-{partition}")
    high_watermarks = OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT)
    entries = high_watermarks.read()
    original = entries.get(TopicPartition(topic, 0))
    if original is not None:
        entries.update((TopicPartition(topic, p), original) for p in range(1, partitions))
        high_watermarks.write(entries)


OLD_PARTITIONS = 200
COMPACTED_PARTITIONS = 4


def workload(log_dir: Path, *, old_partitions: int = OLD_PARTITIONS, compacted_records: int = 20_000) -> None:
    generate(
        GenOptions(
            log_dir=log_dir,
            topics=("old",),
            records=200,
            batch_size=10,
            segment_bytes=4096,
            timestamp_start_ms=0,  # 1970: every closed segment is past retention.ms
        )
    )
    generate(
        GenOptions(
            log_dir=log_dir,
            topics=("c",),
            records=compacted_records,
            keys=500,
            batch_size=200,
            segment_bytes=65_536,
            cleanup_policy=frozenset({"compact"}),
        )
    )
    TopicConfigStore([log_dir]).update("c", {"min.cleanable.dirty.ratio": "0.01"})
    copies_of_one_partition(log_dir, "old", old_partitions)
    copies_of_one_partition(log_dir, "c", COMPACTED_PARTITIONS)


@dataclass
class Acknowledged:
    """What the producers were told was written (``c``), and the log start offsets seen (``old``)."""

    records: dict[int, Served] = field(default_factory=lambda: {p: {} for p in range(COMPACTED_PARTITIONS)})
    old_start_offsets: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def see_start_offsets(self, client: httpx.Client) -> None:
        response = client.get("/v1/topics/old")
        if response.status_code != 200:  # stopping already
            return
        with self.lock:
            for part in response.json()["partitions"]:
                seen = self.old_start_offsets.get(part["partition"], 0)
                self.old_start_offsets[part["partition"]] = max(seen, part["log_start_offset"])


def produce_until(
    stop: threading.Event,
    url: str,
    acked: Acknowledged,
    rng: random.Random,
    tag: str,
    old_partitions: int = OLD_PARTITIONS,
) -> None:
    """Produce batches to ``c`` (unique keys: compaction keeps them all) and to ``old`` (1970 records,
    for retention) until ``stop``; a refused or failed request is simply not acknowledged."""
    n = 0
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.is_set():
            n += 1
            partition = rng.randrange(COMPACTED_PARTITIONS)
            keys = [f"{tag}-{n}-{i}" for i in range(20)]
            body = {
                "records": [
                    {"key": {"type": "STRING", "data": k}, "value": {"type": "STRING", "data": "v" * 50 + k}}
                    for k in keys
                ]
            }
            old = {"records": [{"key": {"type": "STRING", "data": k}, "timestamp": 0} for k in keys[:5]]}
            try:
                response = client.post(f"/v1/topics/c/partitions/{partition}/records", json=body)
            except httpx.HTTPError:
                continue
            if response.status_code == 200:
                served = {
                    offset: (
                        base64.b64encode(k.encode()).decode(),
                        base64.b64encode(("v" * 50 + k).encode()).decode(),
                    )
                    for offset, k in zip(response.json()["offsets"], keys, strict=True)
                }
                with acked.lock:
                    acked.records[partition].update(served)
            try:
                client.post(f"/v1/topics/old/partitions/{rng.randrange(old_partitions)}/records", json=old)
            except httpx.HTTPError:
                continue

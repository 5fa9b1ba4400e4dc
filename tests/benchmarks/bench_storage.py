"""Storage-engine benchmark (issue 2): append, scan and recovery of one generated partition.

Run on demand (not part of CI's pass/fail):

    python tests/benchmarks/bench_storage.py [--size-mib 1024] [--codec none --codec lz4]

For each codec it writes one partition of about ``--size-mib`` MiB (100-byte values, batches of 500
records) under a temporary folder and measures, in the same run:

- append throughput through ``PartitionLog.append_batches`` (target ≥ 300k records/s);
- scan throughput (every record's offset, key and timestamp) against kafka-python's batch iterator on the
  same files (target ≥ 5× kafka-python);
- recovery after an unclean shutdown (every batch validated, indexes rebuilt) against ``cat`` of the same
  files to /dev/null.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from service.base.clock import SystemClock
from service.storage.compression import CompressionType, compression_from_name
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record, encode_batch

BATCH_RECORDS = 500
VALUE_BYTES = 100
DISTINCT_BATCHES = 64


def make_batches(codec: CompressionType, now_ms: int) -> list[bytes]:
    """Pre-encoded producer batches (offsets from 0): the producer's work is not what we measure."""
    rng = random.Random(1)
    values = os.urandom(VALUE_BYTES * 1024)
    batches = []
    for _ in range(DISTINCT_BATCHES):
        records = []
        for i in range(BATCH_RECORDS):
            start = rng.randrange(len(values) - VALUE_BYTES)
            key = b"key-%07d" % rng.randrange(1_000_000)
            records.append(Record(i, now_ms - rng.randrange(1000), key, values[start : start + VALUE_BYTES]))
        batches.append(encode_batch(records, compression=codec))
    return batches


def bench_append(directory: Path, codec: CompressionType, size_bytes: int) -> tuple[PartitionLog, float]:
    clock = SystemClock()
    log = load_partition_log(directory, LogConfig(), clock=clock).log
    batches = make_batches(codec, clock.now_ms())
    written = 0
    appends = 0
    start = time.perf_counter()
    while written < size_bytes:
        batch = batches[appends % DISTINCT_BATCHES]
        log.append_batches(batch)
        written += len(batch)
        appends += 1
    elapsed = time.perf_counter() - start
    records = appends * BATCH_RECORDS
    report(
        "append",
        f"{records / elapsed:,.0f} records/s ({written / elapsed / 2**20:,.0f} MiB/s)",
        f"{records / elapsed / 300_000:.2f}× the 300k records/s target",
    )
    return log, records / elapsed


def scan_ours(log: PartitionLog) -> int:
    count = 0
    for batch in log.read_batches(0):
        for record in batch.records():
            record.offset, record.key, record.timestamp  # noqa: B018 - touching each field is the work
            count += 1
    return count


def scan_kafka_python(files: list[Path]) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.record import MemoryRecords
    count = 0
    for path in files:
        records = MemoryRecords(path.read_bytes())
        while (batch := records.next_batch()) is not None:
            for record in batch:
                record.offset, record.key, record.timestamp  # noqa: B018
                count += 1
    return count


def bench_scan(log: PartitionLog, files: list[Path]) -> float:
    start = time.perf_counter()
    ours = scan_ours(log)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    theirs = scan_kafka_python(files)
    theirs_s = time.perf_counter() - start
    if ours != theirs:
        raise SystemExit(f"scan mismatch: we read {ours} records, kafka-python {theirs}")
    ratio = theirs_s / ours_s
    report(
        "scan",
        f"{ours / ours_s:,.0f} records/s; kafka-python {theirs / theirs_s:,.0f} records/s",
        f"{ratio:.1f}× kafka-python (target ≥ 5×)",
    )
    return ratio


def bench_recovery(directory: Path, files: list[Path], log_end_offset: int) -> float:
    start = time.perf_counter()
    subprocess.run(["cat", *map(str, files)], stdout=subprocess.DEVNULL, check=True)
    cat_s = time.perf_counter() - start
    start = time.perf_counter()
    result = load_partition_log(directory, LogConfig(), clock=SystemClock(), recovery_point=0)
    recover_s = time.perf_counter() - start
    if result.log.log_end_offset != log_end_offset or result.truncated_bytes:
        raise SystemExit("recovery changed the log")
    size = sum(p.stat().st_size for p in files)
    if result.recovered_segments != len(files):
        raise SystemExit(
            f"recovered {result.recovered_segments} of {len(files)} segments: not a full recovery"
        )
    report(
        "recovery",
        f"{recover_s:.2f} s, {len(files)} segments, {size / recover_s / 2**20:,.0f} MiB/s; cat {cat_s:.2f} s",
        f"{recover_s / cat_s:.1f}× the time of cat",
    )
    return recover_s / cat_s


def report(what: str, figure: str, ratio: str) -> None:
    print(f"  {what:<9} {figure:<70} {ratio}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--codec", action="append", default=None)
    args = parser.parse_args()
    codecs = [compression_from_name(c) for c in (args.codec or ["none", "lz4"])]
    from service.storage import records

    decoder = "C fast path" if records._speedups else "pure Python"
    print(f"record decoder: {decoder}; python {sys.version.split()[0]}")
    for codec in codecs:
        with tempfile.TemporaryDirectory(prefix="bench-storage-") as tmp:
            directory = Path(tmp) / "bench-0"
            directory.mkdir()
            print(
                f"{codec.label}: {args.size_mib} MiB partition, {BATCH_RECORDS}-record batches, "
                f"{VALUE_BYTES}-byte values"
            )
            log, _ = bench_append(directory, codec, args.size_mib * 2**20)
            log.flush()
            files = sorted(directory.glob("*.log"))
            bench_scan(log, files)
            end = log.log_end_offset
            for segment in log.segments:
                segment.close_file()  # an unclean stop: indexes left untrimmed, no checkpoint
            bench_recovery(directory, files, end)


if __name__ == "__main__":
    main()

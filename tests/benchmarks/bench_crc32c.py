"""CRC-32C of record batches: cleaner._native's own (SSE4.2, AVX-512 carry-less multiply) against the
``crc32c`` PyPI package, over the same buffers, at the sizes Kafka batches come in.

Run on demand (not part of CI's pass/fail):

    python tests/benchmarks/bench_crc32c.py [--total-mb 256] [--repeats 5]

Both are called from Python here, so each call pays the same interpreter overhead; the cleaner's C loops
call their own CRC directly, with the GIL released, while the package's function could only be reached from
them through a Python call with the GIL taken back per batch (not measured: it only adds to the package's).
Prints MB/s of each and ours / package, per batch size (best of the repeats).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root: see copies.py

import crc32c as package

from cleaner import _native  # type: ignore[attr-defined]

# A producer's batch.size default is 16 KiB; small batches from lingering producers, large ones from
# compressed or re-written batches (the cleaner's output batches run up to max.message.bytes, 1 MiB).
SIZES = [256, 1024, 4096, 16384, 65536, 262144, 1048576]


def mb_per_s(crc: Callable[[memoryview], int], buffers: list[memoryview], repeats: int) -> float:
    total = sum(len(b) for b in buffers)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for b in buffers:
            crc(b)
        best = min(best, time.perf_counter() - started)
    return total / best / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--total-mb", type=int, default=256, help="bytes per size and pass [256 MB]")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    data = memoryview(os.urandom(args.total_mb * 1_000_000))
    print(f"{'batch bytes':>12} {'ours MB/s':>10} {'crc32c MB/s':>12} {'ours/pkg':>9}")
    for size in SIZES:
        buffers = [data[i : i + size] for i in range(0, len(data) - size + 1, size)]
        for b in buffers[:64]:  # the same function: same values
            assert _native.crc32c(b) == package.crc32c(b)
        ours = mb_per_s(_native.crc32c, buffers, args.repeats)
        theirs = mb_per_s(package.crc32c, buffers, args.repeats)
        print(f"{size:>12} {ours:>10.0f} {theirs:>12.0f} {ours / theirs:>9.2f}")


if __name__ == "__main__":
    main()

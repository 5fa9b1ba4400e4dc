"""A fixed log with a bit of everything (keys rewritten many times, tombstones, transactions committed and
aborted, an idempotent producer, three codecs), for the tests that run a round in another process."""

from __future__ import annotations

from pathlib import Path

from service.base.clock import ManualClock
from service.storage.compression import CompressionType
from service.storage.loader import load_partition_log
from tests.cleaner.helpers import compact_config
from tests.cleaner.spark.random_logs import START_MS, Op, Writer

SEGMENT_BYTES = 600


def mixed_ops(rounds: int = 12) -> list[Op]:
    ops: list[Op] = []
    for i in range(rounds):
        key = str(i % 5).encode()
        ops.append(
            Op("put", -1, ((key, b"v%d" % i), (str(i % 3).encode(), b"w%d" % i)), codec=CompressionType.GZIP)
        )
        ops.append(Op("txn", 1 + i % 2, ((key, b"t%d" % i),)))
        ops.append(Op("end", 1 + i % 2, commit=i % 3 != 0))
        ops.append(
            Op("idem", 10, ((str(i % 4).encode(), None if i % 4 == 3 else b"i"),), codec=CompressionType.ZSTD)
        )
        ops.append(Op("tick", amount=1_000))
    return ops


def write_mixed_log(directory: Path, *, segment_bytes: int = SEGMENT_BYTES) -> None:
    """Write the log, close it, and load and close it again: the files as a restarted broker leaves them."""
    directory.mkdir(parents=True)
    clock = ManualClock(START_MS)
    config = compact_config(segment_bytes=segment_bytes)
    writer = Writer(load_partition_log(directory, config, clock=clock).log, clock)
    writer.apply(mixed_ops())
    writer.log.close()
    load_partition_log(directory, config, clock=clock).log.close()

"""The generated logs the key map budget's tests clean with a tiny share, in-process and on Spark: many
more keys than the share's table holds, so that each round spills."""

from __future__ import annotations

from pathlib import Path

from service.base.clock import ManualClock
from service.shell.tools.gen import GenOptions, generate
from service.storage.compression import CompressionType
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig
from tests.cleaner.bounded_round_process import NOW_MS

__all__ = [
    "SEGMENT_BYTES",
    "TINY_SHARE",
    "budget_config",
    "generate_rolled",
    "plain_log",
    "transactional_log",
]

SEGMENT_BYTES = 1 << 20
TINY_SHARE = 1 << 20  # the table at its floor (64 KiB): a few thousand keys before it spills
_COMPACT = frozenset({"compact"})


def budget_config() -> LogConfig:
    return LogConfig(segment_bytes=SEGMENT_BYTES, cleanup_policy=_COMPACT)


def generate_rolled(root: Path, **fields: object) -> Path:
    """``gen``'s compacted partition ``gen-0-0`` under ``root``, its active segment rolled: all cleanable."""
    options = GenOptions(log_dir=root, segment_bytes=SEGMENT_BYTES, cleanup_policy=_COMPACT, **fields)  # type: ignore[arg-type]  # keyword fields of GenOptions
    generate(options)
    directory = root / "gen-0-0"
    log = load_partition_log(directory, budget_config(), clock=ManualClock(NOW_MS)).log
    log.roll()
    log.close()
    return directory


def plain_log(root: Path) -> Path:
    """60,000 records over a key space of 40,000, a tenth tombstones."""
    return generate_rolled(root, records=60_000, keys=40_000, tombstones=0.1)


def transactional_log(root: Path) -> Path:
    """Transactions of 2 batches, a third aborted, lz4 batches."""
    return generate_rolled(
        root,
        records=40_000,
        keys=30_000,
        batch_size=50,
        tombstones=0.05,
        transaction_batches=2,
        aborted_share=0.3,
        compression=CompressionType.LZ4,
    )

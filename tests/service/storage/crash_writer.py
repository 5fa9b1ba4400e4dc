"""A writer process for the SIGKILL test: recover the log, then append forever, acknowledging each append.

Run as ``python -m tests.service.storage.crash_writer DIR SEED``. Each line on stdout is the last offset of
an append that returned; the parent kills this process at a random moment and checks that every
acknowledged record survived the restart. Record ``o`` has key ``k<o mod 50>`` and value ``v<o>``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from service.base.clock import SystemClock
from service.storage.compression import CompressionType
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig
from service.storage.records import Record

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=200, segment_index_bytes=4096)


def record_for(offset: int, timestamp: int) -> Record:
    return Record(offset, timestamp, b"k%d" % (offset % 50), b"v%d" % offset + b"." * (offset % 97))


def main(directory: Path, seed: int) -> None:
    rng = random.Random(seed)
    log = load_partition_log(directory, CONFIG, clock=SystemClock()).log
    out = sys.stdout
    while True:
        count = rng.randint(1, 20)
        first = log.log_end_offset
        records = [record_for(first + i, 1_000 + first + i) for i in range(count)]
        codec = rng.choice(list(CompressionType))
        info = log.append_records(records, compression=codec)
        if rng.random() < 0.05:
            log.flush()
        out.write(f"{info.last_offset}\n")
        out.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))

"""Spark's map by key hash on a transactional producer's batches (issue 10): aborted batches given to C.

Run on demand (not part of CI's pass/fail):

    python tests/benchmarks/bench_class_maps.py [--records 1000000] [--repeats 5] [--work-dir DIR]

Under a temporary folder it generates with ``logcleaner gen``'s library one compacted partition per shape
(``--records`` records of 100-byte values, ``--records / 10`` keys, 16 MiB segments; a transactional
producer committing ten batches at a time, one transaction in ten aborted), in 10-record and in 500-record
batches. For each, as a Spark round's map tasks do for a log of two ranges (``partial_maps``, run here in
this process, without Spark): the driver's plan and header replay, then both key classes mapped, timed,
``--repeats`` times, alternating two ways in the same run: the C loop given the aborted batches' offsets
(as now), and given none (as before: each transactional batch and marker left to the Python rules, batch
by batch). It prints the medians, the throughput over the partition's bytes and the ratio of the two.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cleaner.compaction.offset_map import OffsetMap
from cleaner.spark import partial_maps
from cleaner.spark.partial_maps import MapSplit, class_tasks
from cleaner.spark.round_plan import plan_round
from cleaner.spark.segment_splits import plan_splits
from service.base.clock import SystemClock
from service.shell.tools.gen import GenOptions, generate
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig

SEGMENT_BYTES = 16 << 20
COMPACT = frozenset({"compact"})
MiB = 1 << 20


def class_map_tasks(log_dir: Path) -> tuple[list[MapSplit], int]:
    """The two key classes' map tasks of the partition's round, and the bytes they map."""
    config = LogConfig(cleanup_policy=COMPACT, segment_bytes=SEGMENT_BYTES)
    log = load_partition_log(log_dir, config, clock=SystemClock()).log
    try:
        log.roll()
        end = log.active_segment.base_offset
        plan = plan_round(log, 0, end, int(time.time() * 1000))
        assert plan is not None
        splits = plan_splits(
            log.directory, from_offset=0, until_offset=plan.end_offset, max_split_bytes=1 << 30
        )
        size = sum(split.end_position - split.start_position for split in splits)
        return class_tasks(0, splits, 0, plan.map_scan.aborted_batches, 2), size
    finally:
        log.close()


def map_seconds(tasks: list[MapSplit]) -> float:
    started = time.perf_counter()
    for task in tasks:
        class_map: OffsetMap = partial_maps._task_map(task)
        partial_maps._map_into(task, class_map, spare_core=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--work-dir", type=Path, help="where to generate (default: a temporary folder)")
    args = parser.parse_args()
    listed = partial_maps._map_split

    def unlisted(*arguments: object) -> None:  # the code before: no aborted batches for the C loop
        split, start, aborted, _listed, offset_map, stats = arguments
        listed(split, start, aborted, None, offset_map, stats)  # type: ignore[arg-type]

    ways: dict[str, Callable[..., None]] = {"aborted batches given to C": listed, "before": unlisted}
    with tempfile.TemporaryDirectory(dir=args.work_dir) as tmp:
        for batch_size in (10, 500):
            root = Path(tmp) / f"batches-of-{batch_size}"
            generate(
                GenOptions(
                    log_dir=root,
                    topics=("t",),
                    records=args.records,
                    batch_size=batch_size,
                    keys=max(args.records // 10, 1),
                    segment_bytes=SEGMENT_BYTES,
                    cleanup_policy=COMPACT,
                    transaction_batches=10,
                    aborted_share=0.1,
                )
            )
            tasks, size = class_map_tasks(root / "t-0")
            times: dict[str, list[float]] = {name: [] for name in ways}
            for _ in range(args.repeats):
                for name, way in ways.items():
                    partial_maps._map_split = way
                    times[name].append(map_seconds(tasks))
            partial_maps._map_split = listed
            medians = {name: statistics.median(spent) for name, spent in times.items()}
            shape = f"{batch_size}-record transactional batches, one transaction in ten aborted"
            print(f"{shape}, {size / MiB:.0f} MiB:")
            for name, median in medians.items():
                print(f"  {name}: {median:.3f} s, {size / MiB / median:.0f} MiB/s")
            print(f"  speed-up: {medians['before'] / medians['aborted batches given to C']:.1f}x")


if __name__ == "__main__":
    main()

"""The in-process cleaner on the batches real producers write (issue 10): small batches, a producer id on
every batch (idempotent producers, Kafka's default since 3.0), each codec.

Run on demand (not part of CI's pass/fail):

    python tests/benchmarks/bench_batch_shapes.py [--records 1000000] [--repeats 3] [--work-dir DIR]
        [--baseline-tree DIR] [--shape TEXT ...]

Under a temporary folder it generates with ``logcleaner gen``'s library one compacted partition per shape
(``--records`` records of 100-byte values, ``--records / 10`` keys drawn uniformly, 5% tombstones, 16 MiB
segments): 500-record batches without a producer id (the shape of the other cleaner benchmarks), then
10-record batches of an idempotent producer, uncompressed and with each codec, and 500-record ones with lz4;
then a transactional producer's 10-record lz4 batches, committed ten at a time, then with one transaction
in ten aborted (``--shape TEXT``, repeatable: only the shapes whose names contain one of them).
For each shape, in the same run: ``cp -r`` of the partition (the baseline), then ``logcleaner clean
--override log.cleaner.engine=in-process --json`` on a fresh copy (synced to disk first), ``--repeats``
times. It prints the medians: the round's time as ``clean`` reports it, its throughput, and that
throughput over ``cp``'s. With ``--baseline-tree`` (a checkout of another commit, e.g. ``git worktree add
DIR <commit>``; its C extensions are built in place first), each round is also run by that tree's code,
interleaved with this one's, and the ratio of the two throughputs is printed. (Byte-for-byte equality with
the Python rules is the tests' job, not this one's.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from pathlib import Path
from typing import NamedTuple

from service.shell.tools.gen import GenOptions, generate
from service.storage.compression import CompressionType

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository's root: see copies.py
from tests.benchmarks.copies import cp_seconds, fresh_copy

MiB = 1 << 20


class Shape(NamedTuple):
    name: str
    batch_size: int
    codec: CompressionType
    idempotent: bool
    transaction_batches: int = 0  # a transactional producer's instead, a marker every so many batches
    aborted_share: float = 0.0


SHAPES = [
    Shape("500 a batch, no producer id", 500, CompressionType.NONE, False),
    Shape("10 a batch, idempotent, none", 10, CompressionType.NONE, True),
    Shape("10 a batch, idempotent, lz4", 10, CompressionType.LZ4, True),
    Shape("10 a batch, idempotent, snappy", 10, CompressionType.SNAPPY, True),
    Shape("10 a batch, idempotent, zstd", 10, CompressionType.ZSTD, True),
    Shape("10 a batch, idempotent, gzip", 10, CompressionType.GZIP, True),
    Shape("500 a batch, idempotent, lz4", 500, CompressionType.LZ4, True),
    Shape("10 a batch, txns of 10, lz4", 10, CompressionType.LZ4, False, 10),
    Shape("10 a batch, txns of 10, 10% aborted", 10, CompressionType.LZ4, False, 10, 0.1),
]


def generate_shape(log_dir: Path, shape: Shape, records: int) -> None:
    generate(
        GenOptions(
            log_dir=log_dir,
            topics=("t",),
            records=records,
            batch_size=shape.batch_size,
            keys=max(records // 10, 1),
            tombstones=0.05,
            compression=shape.codec,
            segment_bytes=16 * MiB,
            cleanup_policy=frozenset({"compact"}),
            idempotent=shape.idempotent,
            transaction_batches=shape.transaction_batches,
            aborted_share=shape.aborted_share,
        )
    )


def build_in_place(tree: Path) -> None:
    """The tree's C extensions (its ``pyproject.toml``'s ext-modules), compiled next to their sources as
    ``pip install`` would compile them, so that the tree's code runs with its own C."""
    modules = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]["ext-modules"]
    config = sysconfig.get_config_vars()
    includes = ["-I" + sysconfig.get_paths()["include"]]
    for module in modules:
        target = tree / (module["name"].replace(".", "/") + config["EXT_SUFFIX"])
        sources = [str(tree / source) for source in module["sources"]]
        flags = config["CFLAGS"].split() + config["CCSHARED"].split() + includes
        link = config["LDSHARED"].split()
        subprocess.run([*link, *flags, *sources, "-o", str(target)], check=True)


def clean_round(log_dir: Path, tree: Path | None = None) -> dict[str, float]:
    """One offline in-process ``clean`` of the log dir (by ``tree``'s code if given): its round's stats."""
    command = [sys.executable, "-c", "from service.__main__ import run; run()", "clean", "--json"]
    command += ["--override", f"log.dirs={log_dir}", "--override", "log.cleaner.engine=in-process"]
    env = {**os.environ, "PYTHONPATH": str(tree)} if tree is not None else None
    # run from the log dir's parent: no source tree in the current directory shadows the one meant
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=env, cwd=log_dir.parent)
    (cleaned,) = json.loads(done.stdout)["cleaned"]
    stats: dict[str, float] = cleaned["stats"]
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, help="where to generate (default: a temporary folder)")
    parser.add_argument("--baseline-tree", type=Path, help="a checkout whose code runs each round too")
    parser.add_argument("--shape", action="append", help="only the shapes whose names contain this")
    args = parser.parse_args()
    tree = args.baseline_tree.resolve() if args.baseline_tree else None
    if tree is not None:
        build_in_place(tree)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-shapes-"))
    work.mkdir(parents=True, exist_ok=True)
    header = f"{'shape':36} {'MiB':>6} {'round ms':>9} {'map ms':>7} {'rewrite ms':>10} {'MiB/s':>7}"
    print(f"{args.records} records a partition, {args.repeats} rounds a shape, under {work}")
    print(f"{header} {'÷ cp':>6}" + (f" {'÷ baseline':>10}" if tree else ""))
    try:
        for shape in SHAPES:
            if args.shape and not any(text in shape.name for text in args.shape):
                continue
            source = work / "src"
            shutil.rmtree(source, ignore_errors=True)
            generate_shape(source, shape, args.records)
            size = sum(p.stat().st_size for p in source.glob("t-0/*.log"))
            copies = [cp_seconds(source, work / "cp") for _ in range(args.repeats)]
            rounds, baseline = [], []
            for _ in range(args.repeats):
                rounds.append(clean_round(fresh_copy(source, work / "run")))
                if tree is not None:
                    baseline.append(clean_round(fresh_copy(source, work / "run"), tree)["elapsed_ms"])
            elapsed = statistics.median(r["elapsed_ms"] for r in rounds) / 1000
            map_ms = statistics.median(r["map_build_ms"] for r in rounds)
            rewrite_ms = statistics.median(r["rewrite_ms"] for r in rounds)
            ratio = statistics.median(copies) / elapsed
            print(
                f"{shape.name:36} {size / MiB:6.0f} {elapsed * 1000:9.0f} {map_ms:7.0f} {rewrite_ms:10.0f}"
                f" {size / MiB / elapsed:7.0f} {ratio:6.2f}"
                + (f" {statistics.median(baseline) / 1000 / elapsed:10.2f}" if baseline else ""),
                flush=True,
            )
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

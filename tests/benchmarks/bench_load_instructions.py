"""Instructions, not seconds: ``serve``'s load of a broker's worth of partitions and offline
``explain --json``, counted by valgrind's callgrind, for this tree and another in the same run (issue 47).

Run on demand (not part of CI's pass/fail), from the repository root, with valgrind installed:

    PYTHONPATH=$PWD python3 -m tests.benchmarks.bench_load_instructions [--partitions 10000] [--keep DIR]
        [--compare-tree DIR] [--skip-explain]

On a machine whose wall and CPU times move by a third between runs of the same command (this project's
2-core VM), a change of a few per cent in the load cannot be read from ``bench_partitions.py``'s seconds;
the count of instructions the processes execute can, and it moves by less than 0.1% between runs of the
same tree. It counts user-space instructions only: the system calls' time in the kernel, most of the
walk's, is not in it.

The dir is ``bench_partitions.py``'s (built under ``--keep DIR``, or a temporary folder). Figures, each tree:

- the load: ``load_log_dir`` as ``serve``'s start-up runs it after a clean stop (the dir's C scan started
  first and finished, as it is during the imports), in a process of its own; its count less the count of
  the same process that stops before loading (the interpreter and the imports). The clean-shutdown marker
  the load removes is written back after it (``--keep``'s dir is left as it was);
- offline ``explain --json``: every process of the command (the parent and its forked shares), whole.

The last lines give each figure of this tree against ``--compare-tree``'s (a ``git archive`` of another
commit with its extensions built or copied in).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from service.storage.log_files import RECOVERY_POINT_CHECKPOINT
from tests.benchmarks.bench_partitions import build_log_dir

# Run by the counted process, in the tree under test: argv[1] the log dir, argv[2] 1 to load, 0 to stop first.
_LOAD = """
import os, sys
from pathlib import Path
from service.base.clock import SystemClock
from service.storage.log_config import LogConfig
from service.storage.log_dir import load_log_dir
from service.storage.prescan import LogDirPrescan
path = Path(sys.argv[1])
if sys.argv[2] == "1":
    marker = (path / ".kafka_cleanshutdown").read_bytes()
    prescan = LogDirPrescan(path, sorted(os.listdir(path))).start()
    prescan._thread.join()  # scanned whole, as during serve's imports: the loader makes none of its calls
    config = LogConfig()
    try:
        loaded = load_log_dir(path, lambda topic: config, clock=SystemClock(), prescan=prescan)
    finally:
        (path / ".kafka_cleanshutdown").write_bytes(marker)
    print(len(loaded.logs), file=sys.stderr)
os._exit(0)
"""


_PACKAGES = ("service", "api", "cleaner", "scheduler")


def _with_bytecode(tree: Path) -> dict[str, str]:
    """The environment of a counted process: ``tree`` on the path, its byte-code written and read."""
    environment = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    return environment


def instructions(tree: Path, command: list[str], out: Path) -> int:
    """The instructions every process of ``command`` executed (callgrind), run from ``tree``."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    environment = _with_bytecode(tree)
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/callgrind.%p.out", *command],
        cwd=tree,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    counts = [int(n) for n in re.findall(r"Collected : (\d+)", done.stderr)]
    if not counts:
        raise SystemExit(f"no count from valgrind: {done.stderr[-500:]}")
    return sum(counts)


def count_tree(tree: Path, log_dir: Path, work: Path, *, explain: bool) -> dict[str, int]:
    python = sys.executable
    # Byte-code compiled first: a tree's first run would count compiling each module it imports (the first
    # ``explain`` of a fresh ``git archive`` counted 7% more than its second).
    subprocess.run(
        [python, "-m", "compileall", "-q", *_PACKAGES], cwd=tree, env=_with_bytecode(tree), check=True
    )
    figures = {}
    imports = instructions(tree, [python, "-c", _LOAD, str(log_dir), "0"], work)
    figures["load"] = instructions(tree, [python, "-c", _LOAD, str(log_dir), "1"], work) - imports
    if explain:
        figures["explain --json"] = instructions(
            tree,
            [python, "-m", "service", "explain", "--json", "--override", f"log.dirs={log_dir}",
             "--override", "log.retention.ms=172800000"],
            work,
        )  # fmt: skip
    return figures


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, help="build the dir here, or reuse the one built there")
    parser.add_argument("--compare-tree", type=Path, help="another source tree, counted in the same run")
    parser.add_argument("--skip-explain", action="store_true", help="count the load only")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="logcleaner-bench-instructions-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        log_dir = root / "logs"
        if not (log_dir / RECOVERY_POINT_CHECKPOINT).exists():
            build_log_dir(root, args.partitions)
        partitions = sum(1 for name in os.listdir(log_dir) if (log_dir / name).is_dir())
        trees = ([args.compare_tree.resolve()] if args.compare_tree else []) + [Path.cwd()]
        results = {}
        for tree in trees:
            results[tree] = count_tree(tree, log_dir, Path(tmp) / "callgrind", explain=not args.skip_explain)
            for name, count in results[tree].items():
                print(f"{name:16} {tree}: {count:,} instructions, {count / partitions:,.0f} a partition")
        if args.compare_tree:
            this, other = results[Path.cwd()], results[trees[0]]
            for name, count in this.items():
                print(f"{name:16} this tree / {trees[0]}: {count / other[name]:.3f}")


if __name__ == "__main__":
    main()

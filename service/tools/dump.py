"""``logcleaner dump``: print what Kafka's files hold, like ``kafka-dump-log.sh``, as text or JSON.

The command checks every file's kind first (an unknown one is bad input, exit 2 before any output), then
reads the files in order (``dump_readers``) and renders each item as it comes (``dump_render``). Corrupt
bytes do not stop it: everything readable is shown, each problem reported where it is, and the command
exits 2 after every file is done.
"""

from __future__ import annotations

from pathlib import Path

import click

from service.tools.dump_readers import KINDS, TEMP_SUFFIXES, DumpProblem, file_kind, read_file
from service.tools.dump_render import JsonRenderer, TextRenderer

__all__ = ["dump_command"]

_EXIT_CORRUPT = 2  # cli.py's "bad input" code; dump cannot import cli (cli imports dump)


def _require_kind(path: Path) -> str:
    kind = file_kind(path)
    if kind is None:
        supported = "; ".join(f"{k} ({what})" for k, what in KINDS.items())
        raise click.BadParameter(
            f"{path}: unknown file kind; dump reads {supported}, also with a "
            f"{'/'.join(TEMP_SUFFIXES)} suffix",
            param_hint="FILE",
        )
    return kind


@click.command("dump")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--records", "with_records", is_flag=True, help="Also print every record of .log files.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def dump_command(files: tuple[Path, ...], with_records: bool, as_json: bool) -> int:
    """Print the batches (and records) of .log files and the entries of every other file a broker writes.

    Like kafka-dump-log.sh. Reads .log, .index, .timeindex, .txnindex, .snapshot (also
    .deleted/.cleaned/.swap), the three offset checkpoint files, leader-epoch-checkpoint,
    partition.metadata and .kafka_cleanshutdown. Corrupt bytes: everything readable is printed, then the
    error with its position on stderr (and as "error" in JSON); the exit code is 2.
    """
    kinds = [_require_kind(path) for path in files]
    renderer: TextRenderer | JsonRenderer = JsonRenderer() if as_json else TextRenderer()
    failed = False
    for path, kind in zip(files, kinds, strict=True):
        renderer.begin_file(path, kind)
        problems: list[DumpProblem] = []
        for item in read_file(path, kind, with_records=with_records):
            if isinstance(item, DumpProblem):
                problems.append(item)
                renderer.problem(path, item)
            else:
                renderer.item(item)
        renderer.end_file(problems)
        failed = failed or bool(problems)
    renderer.finish()
    return _EXIT_CORRUPT if failed else 0

"""``logcleaner dump``: print what Kafka's files hold, like ``kafka-dump-log.sh``, as text or JSON.

The command checks every file's kind first (an unknown one is bad input, exit 2 before any output), then
reads the files in order (``dump_readers``) and renders each item as it comes (``dump_render``). Corrupt
bytes do not stop it: everything readable is shown, each problem reported where it is, and the command
exits 2 after every file is done.
"""

from __future__ import annotations

from pathlib import Path

import click

from service.metadata.records import decode_cluster_metadata_record
from service.shell.tools.dump_readers import KINDS, TEMP_SUFFIXES, DumpProblem, file_kind, read_file
from service.shell.tools.dump_render import JsonRenderer, RecordDecoder, TextRenderer
from service.storage.coordinator_records import decode_offsets_record, decode_transaction_log_record

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
@click.option(
    "--offsets-decoder",
    is_flag=True,
    help="Decode records as __consumer_offsets' offset commits and group metadata (implies --records).",
)
@click.option(
    "--transaction-log-decoder",
    is_flag=True,
    help="Decode records as __transaction_state's transaction metadata (implies --records).",
)
@click.option(
    "--cluster-metadata-decoder",
    is_flag=True,
    help="Decode records as KRaft metadata records of __cluster_metadata (implies --records).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
def dump_command(
    files: tuple[Path, ...],
    with_records: bool,
    offsets_decoder: bool,
    transaction_log_decoder: bool,
    cluster_metadata_decoder: bool,
    as_json: bool,
) -> int:
    """Print the batches (and records) of .log files and the entries of every other file a broker writes.

    Like kafka-dump-log.sh. Reads .log, .index, .timeindex, .txnindex, .snapshot (also
    .deleted/.cleaned/.swap), the three offset checkpoint files, leader-epoch-checkpoint,
    partition.metadata, .kafka_cleanshutdown and KRaft metadata snapshots (<offset>-<epoch>.checkpoint).
    Corrupt bytes: everything readable is printed, then the
    error with its position on stderr (and as "error" in JSON); the exit code is 2. With a decoder, each
    record's key and value are shown decoded (a version Kafka does not define: raw, with a note).
    """
    if offsets_decoder + transaction_log_decoder + cluster_metadata_decoder > 1:
        raise click.BadParameter(
            "give one of --offsets-decoder, --transaction-log-decoder and --cluster-metadata-decoder",
            param_hint="--offsets-decoder",
        )
    kinds = [_require_kind(path) for path in files]
    decoder: RecordDecoder | None = None
    if offsets_decoder:
        decoder = decode_offsets_record
    elif transaction_log_decoder:
        decoder = decode_transaction_log_record
    elif cluster_metadata_decoder:
        decoder = decode_cluster_metadata_record
    with_records = with_records or decoder is not None
    renderer = JsonRenderer(decoder) if as_json else TextRenderer(decoder)
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

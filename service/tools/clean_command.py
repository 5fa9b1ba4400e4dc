"""``logcleaner clean``: offline compaction with the daemon's cleaner and engine, on the caller's thread.

Every eligible compacted partition is cleaned until none is left (a partition that fails is marked
uncleanable, reported, and the exit code is 1), or the one named is cleaned whatever its dirty ratio.
``cleaner-offset-checkpoint`` is written as the daemon writes it; replaced files are removed before exit.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from cleaner.setup import build_engine, build_log_cleaner
from service.errors import LogCleanerError
from service.storage.topic_partition import TopicPartition
from service.tools.clean_preview import NotCleaned, nothing_to_clean
from service.tools.log_commands import config_options, json_option, load_config, offline_log_manager
from service.wording import counted

__all__ = ["clean_command"]


class CleaningFailedError(LogCleanerError):
    """Some partitions could not be cleaned (their errors were logged); exit code 1."""


@click.command("clean")
@config_options
@click.option("--topic", help="Clean only this topic's partition (needs --partition).")
@click.option("--partition", type=click.IntRange(min=0), help="The partition to clean (needs --topic).")
@json_option
def clean_command(
    config_file: Path | None,
    overrides: tuple[str, ...],
    topic: str | None,
    partition: int | None,
    as_json: bool,
) -> None:
    """Compact offline: every cleanable partition until none is left, or the one named (cleaned now,
    whatever its dirty ratio; never past its first uncleanable offset)."""
    if (topic is None) != (partition is None):
        raise click.UsageError("--topic and --partition go together")
    broker = load_config(config_file, overrides)
    if topic is None:
        not_cleaned = nothing_to_clean(broker)
        if not_cleaned is not None:  # nothing would change: the files stay as they are
            _report_nothing_cleaned(not_cleaned, as_json=as_json)
            return
    with offline_log_manager(broker) as manager:
        engine = build_engine(broker, manager.clock)
        try:
            cleaner = build_log_cleaner(broker, manager, engine, scheduler=manager.scheduler, threads=0)
            if topic is not None and partition is not None:
                cleaned = [cleaner.clean_partition(TopicPartition(topic, partition))]
                failed = 0
            else:
                cleaned, failed = [], 0
                for _ in range(4 * len(manager.logs) + 1):  # each log's rounds converge; this only bounds
                    outcomes = cleaner.clean_filthiest_logs()  # several at once when they share a Spark job
                    if not outcomes:
                        break
                    failed += sum(outcome is None for outcome in outcomes)
                    cleaned += [outcome.to_json() for outcome in outcomes if outcome is not None]
        finally:
            engine.close()
    if as_json:
        click.echo(json.dumps({"cleaned": cleaned}, indent=2))
    else:
        for doc in cleaned:
            click.echo(_describe(doc))
        click.echo(f"{counted(len(cleaned), 'partition')} cleaned")
    if failed:
        raise CleaningFailedError(f"{failed} partition(s) failed to clean and were marked uncleanable")


def _report_nothing_cleaned(not_cleaned: list[NotCleaned], *, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"cleaned": []}, indent=2))
        return
    if not not_cleaned:
        click.echo("0 partitions cleaned: no partition has cleanup.policy=compact (files left untouched)")
        return
    lines = [entry.describe() for entry in not_cleaned]
    lines.append(
        "0 partitions cleaned: no compacted partition is dirty enough (files left untouched; "
        "clean --topic T --partition P cleans one whatever its ratio)"
    )
    click.echo("\n".join(lines))


def _describe(doc: dict[str, object]) -> str:
    stats = doc["stats"]
    assert isinstance(stats, dict)
    return (
        f"cleaned {doc['topic']}-{doc['partition']} [{doc['first_dirty_offset']}, {doc['end_offset']}): "
        f"read {stats['bytes_read']} bytes ({stats['records_read']} records), "
        f"wrote {stats['bytes_written']} bytes ({stats['records_retained']} records) "
        f"in {stats['elapsed_ms']} ms ({stats['mb_per_s']} MB/s)"
    )

"""``logcleaner clean``: offline compaction with the daemon's cleaner and engine, on the caller's thread.

Every eligible compacted partition is cleaned until none is left (a partition that fails is marked
uncleanable, reported, and the exit code is 1), or the one named is cleaned whatever its dirty ratio.
``cleaner-offset-checkpoint`` is written as the daemon writes it; replaced files are removed before exit.
SIGINT or SIGTERM stops the round in flight at its next abort check (the groups already swapped stay,
complete; the rest of the log is untouched and its checkpoint not advanced), the logs close cleanly, and
the command exits 130 or 143 with one line naming the partition and how far it got.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from cleaner.pool.log_cleaner import LogCleaner
from service.base.errors import ConflictError, InterruptedCommandError, LogCleanerError
from service.base.wording import counted
from service.core.log_manager import LogManager
from service.shell.node import build_engine, build_log_cleaner
from service.shell.tools.clean_preview import NotCleaned, nothing_to_clean
from service.shell.tools.interruption import Interruption, interruptible
from service.shell.tools.log_commands import (
    config_options,
    json_option,
    load_config,
    offline_compacted_log_manager,
)
from service.storage.log_files import DELETED_SUFFIX, LOG_SUFFIX
from service.storage.topic_partition import TopicPartition

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
    with interruptible() as interruption:
        if topic is None:
            not_cleaned = nothing_to_clean(broker)
            if interruption.signum is not None:
                raise InterruptedCommandError(
                    f"interrupted by {interruption.signal_name} before cleaning anything: nothing changed",
                    signum=interruption.signum,
                )
            if not_cleaned is not None:  # nothing would change: the files stay as they are
                _report_nothing_cleaned(not_cleaned, as_json=as_json)
                return
        with offline_compacted_log_manager(broker) as (manager, cleaning):
            engine = build_engine(broker, manager.clock)
            try:
                cleaner = build_log_cleaner(
                    broker, manager, cleaning, engine, scheduler=manager.scheduler, threads=0
                )
                interruption.on_signal = cleaner.begin_stop  # the round stops at its next abort check
                if interruption.signum is not None:  # it came while the logs loaded
                    cleaner.begin_stop()
                cleaned, failed = _clean(cleaner, manager, topic, partition, interruption)
                stopped = _stopped_round(cleaner, manager, interruption, len(cleaned))
            finally:
                engine.close()
    if as_json:
        click.echo(json.dumps({"cleaned": cleaned}, indent=2))
    else:
        for doc in cleaned:
            click.echo(_describe(doc))
        if stopped is None:  # else the stopped line says it
            click.echo(f"{counted(len(cleaned), 'partition')} cleaned")
    if stopped is not None:
        raise stopped
    if failed:
        raise CleaningFailedError(
            f"{counted(failed, 'partition')} failed to clean and were marked uncleanable"
        )


def _clean(
    cleaner: LogCleaner,
    manager: LogManager,
    topic: str | None,
    partition: int | None,
    interruption: Interruption,
) -> tuple[list[dict[str, object]], int]:
    """The rounds: the named partition's, or every cleanable one's until none is left or a signal came.
    Returns the cleaned entries and how many partitions failed (an aborted round is not a failure)."""
    if topic is not None and partition is not None:
        try:
            return [cleaner.clean_partition(TopicPartition(topic, partition))], 0
        except ConflictError:
            if interruption.signum is None:
                raise
            return [], 0
    cleaned: list[dict[str, object]] = []
    failed = 0
    for _ in range(4 * len(manager.logs) + 1):  # each log's rounds converge; this only bounds
        if interruption.signum is not None:
            break
        outcomes = cleaner.clean_filthiest_logs()  # several at once when they share a Spark job
        if not outcomes:
            break
        if interruption.signum is None:
            failed += sum(outcome is None for outcome in outcomes)
        cleaned += [outcome.to_json() for outcome in outcomes if outcome is not None]
    return cleaned, failed


def _stopped_round(
    cleaner: LogCleaner, manager: LogManager, interruption: Interruption, cleaned: int
) -> InterruptedCommandError | None:
    """What to say of a signal: the partitions whose round it stopped, and how far each got (the
    segments already replaced by cleaned ones: their ``.deleted`` files wait for the exit)."""
    if interruption.signum is None:
        return None
    before = f"{counted(cleaned, 'partition')} cleaned before it"
    stopped = cleaner.shutdown(timeout_s=0)
    if not stopped:
        return InterruptedCommandError(
            f"interrupted by {interruption.signal_name} between rounds, {before}; nothing is lost: run "
            "clean again to clean the rest",
            signum=interruption.signum,
        )
    progress = []
    for tp in stopped:
        log = manager.logs.get(tp)
        replaced = 0 if log is None else len(list(log.directory.glob(f"*{LOG_SUFFIX}{DELETED_SUFFIX}")))
        progress.append(f"{tp} ({counted(replaced, 'segment')} already replaced by cleaned ones)")
    return InterruptedCommandError(
        f"interrupted by {interruption.signal_name} while cleaning {', '.join(progress)}, {before}; "
        "nothing is lost (each swap is complete, the rest of the log untouched, its cleaner checkpoint not "
        "advanced): run clean again to complete it",
        signum=interruption.signum,
    )


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

"""The offline log commands: ``retention``, ``explain`` and ``topic-config``.

Each loads the configuration like ``serve`` (``--config`` plus ``--override``). A command that changes the
logs (``retention``, ``clean``) takes the log dirs' locks, loads the logs, acts, and closes them as a clean
shutdown would (checkpoints and marker), so the daemon's next start needs no recovery; delayed file
deletions run before it exits. An inspection (``explain``, ``retention --dry-run``) writes nothing: it loads
the log dirs read-only (``read_only.py``), so it also works while a daemon holds them; at a broker's worth
of partitions it is split over processes (``shares.py``), and ``explain --topic`` reads only that topic's
partition dirs. No offline command creates a missing log dir, and an offline log dir is an error (exit 2),
never "nothing".

What only one command uses (the summary's estimates, the topic-config import) is imported by that command,
not by every one: an inspection's start is serial time before its shares fork.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from service.base.clock import SystemClock
from service.base.errors import InterruptedCommandError, InvalidInputError, LogCleanerError, NotFoundError
from service.base.wording import counted
from service.config.broker_config import BrokerConfig, load_broker_config
from service.core.collector import collector_paused
from service.core.engine_choice import EngineChoice
from service.core.log_manager import DeletedSegment, LogManager
from service.core.reports import explain_partitions, retention_document, topic_config_document
from service.core.tasks import DeferredTasks
from service.shell.node import (
    build_offline_compacted_log_manager,
    build_offline_log_manager,
    build_topic_store,
    load_metadata,
)
from service.shell.process_exit import skip_teardown
from service.shell.tools.explain_text import explanation_lines
from service.shell.tools.interruption import Interruption, interruptible
from service.shell.tools.json_text import dumps_indented, dumps_indented_items, indented_array_document
from service.shell.tools.read_only import ScratchCopies, check_log_dir_paths, require_log_dirs, scratch_copies
from service.shell.tools.shares import outlives_its_share, partition_dir_names, process_count, run_in_shares
from service.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from cleaner.pool.manager import CleanerManager

__all__ = [
    "config_options",
    "explain_command",
    "inspect_logs",
    "json_option",
    "load_config",
    "offline_compacted_log_manager",
    "offline_log_manager",
    "read_only_log_manager",
    "retention_command",
    "topic_config_command",
]

logger = logging.getLogger(__name__)

config_file_option = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A server.properties file.",
)
override_option = click.option(
    "--override", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config key (repeatable)."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")


def config_options(command: click.decorators.FC) -> click.decorators.FC:
    return config_file_option(override_option(command))


def load_config(
    config_file: Path | None, overrides: tuple[str, ...], *, check_dirs: bool = True
) -> BrokerConfig:
    """The broker configuration; unknown keys are warnings, invalid values stop here (exit code 2), and so
    does a log dir that is a file or cannot be read (``check_dirs=False``: the caller reports those)."""
    broker, warnings = load_broker_config(config_file, overrides)
    for warning in warnings:
        logger.warning("%s", warning)
    if broker.ignored_broker_keys:
        logger.debug(
            "Kafka broker keys logcleaner does not use, ignored: %s", ", ".join(broker.ignored_broker_keys)
        )
    if check_dirs:
        check_log_dir_paths(broker.log_dir_paths)
    return broker


@contextmanager
def offline_log_manager(broker: BrokerConfig) -> Iterator[LogManager]:
    """The LogManager of an offline command that changes the logs (it locks the dirs, and closes them as a
    clean shutdown would).

    A missing log dir is an error (only ``serve`` creates one), and so is a log dir that went offline while
    loading: the command cannot answer for it.
    """
    require_log_dirs(list(broker.log_dir_paths))
    manager, tasks = build_offline_log_manager(broker)
    with _loaded(manager, tasks) as loaded:
        yield loaded


@contextmanager
def offline_compacted_log_manager(broker: BrokerConfig) -> Iterator[tuple[LogManager, CleanerManager]]:
    """``offline_log_manager``'s, with the cleaner's ``CleanerManager`` as its cleaning port
    (``logcleaner clean``)."""
    require_log_dirs(list(broker.log_dir_paths))
    manager, cleaning, tasks = build_offline_compacted_log_manager(broker)
    with _loaded(manager, tasks) as loaded:
        yield loaded, cleaning


@contextmanager
def read_only_log_manager(
    broker: BrokerConfig, share: frozenset[str] | None = None, *, allow_offline: bool = False
) -> Iterator[tuple[LogManager, ScratchCopies]]:
    """The LogManager of an inspection: it writes nothing into the log dirs (``read_only.py``). Errors and
    documents name the user's files, not the scratch copies of partitions that a load would write to.
    ``share``: the partition dir names to load (None: every one); ``allow_offline``: a log dir that went
    offline while loading is the caller's to report (the summary's ``unreadable``), not an error."""
    require_log_dirs(list(broker.log_dir_paths))
    with scratch_copies(share) as copies:
        try:
            manager, tasks = build_offline_log_manager(broker, read_only=copies)
            with _loaded(manager, tasks, read_only=True, allow_offline=allow_offline) as loaded:
                yield loaded, copies
        except (LogCleanerError, OSError) as exc:
            exc.args = (copies.originals_named(str(exc)),)
            raise


@contextmanager
def _loaded(
    manager: LogManager, tasks: DeferredTasks, *, read_only: bool = False, allow_offline: bool = False
) -> Iterator[LogManager]:
    manager.startup()
    try:
        for path, reason in manager.offline_dirs.items():
            if not allow_offline:
                raise InvalidInputError(f"log dir {path} is offline: {reason}")
        yield manager
        if not read_only:  # a read-only load schedules nothing it may run
            tasks.run_all()
    finally:
        if not (read_only and outlives_its_share(manager)):  # a forked share's process ends at once
            manager.shutdown()


T = TypeVar("T")


def inspect_logs(
    broker: BrokerConfig,
    inspect: Callable[[LogManager, ScratchCopies], list[T]],
    selects: Callable[[TopicPartition], bool] | None = None,
    *,
    allow_offline: bool = False,
    shares: bool = True,
) -> list[T]:
    """``inspect`` of the read-only LogManager over the partitions ``selects`` keeps (None: all), split over
    processes at a broker's worth of partitions (``shares.py``); the results in topic-partition order.

    Cyclic garbage collection is paused throughout: an inspection only adds objects that live until it
    ends, and each full collection would walk every loaded log again. What is alive at the end (the logs a
    share leaves to the process's exit, the answer) is frozen out of the collector's view before it
    resumes: the first collection after the pause walked all of it (0.15 s at 10,000 partitions, while the
    answer waited to be written). ``allow_offline``: see
    ``read_only_log_manager``; ``shares=False``: one process whatever the count."""
    log_dirs = list(broker.log_dir_paths)
    require_log_dirs(log_dirs)

    def run_share(share: frozenset[str] | None) -> list[T]:
        with read_only_log_manager(broker, share, allow_offline=allow_offline) as (manager, copies):
            return inspect(manager, copies)

    skip_teardown()  # read-only: once its answer is written, the process has nothing to free
    with collector_paused(freeze=True):
        names = partition_dir_names(log_dirs, selects)
        processes = process_count(len(names)) if shares else 1
        if processes == 1 and selects is None:
            return run_share(None)  # every partition dir, as the load lists them
        return run_in_shares(names, run_share, processes)


def _retention_pass(
    manager: LogManager, broker: BrokerConfig, *, dry_run: bool, interruption: Interruption | None = None
) -> tuple[list[DeletedSegment], str | None]:
    """The pass, log by log; with a signal recorded in ``interruption`` it stops before the next log and
    says where (else None)."""
    deleted: list[DeletedSegment] = []
    logs = sorted(
        manager.logs.values(), key=lambda log: (log.topic_partition.topic, log.topic_partition.partition)
    )
    for done, log in enumerate(logs):
        if interruption is not None and interruption.signum is not None:
            return deleted, f"before {log.topic_partition} ({done} of {counted(len(logs), 'partition')} done)"
        if log.config.is_compacted and not broker.log_cleaner_enable:
            continue
        if manager.has_future_replica(log.topic_partition) and broker.log_cleaner_enable:
            continue  # paused while it moves between log dirs, as the daemon's cleaner pauses it
        deleted.extend(manager.delete_old_segments(log, dry_run=dry_run))
    return deleted, None


@click.command("retention")
@config_options
@click.option("--dry-run", is_flag=True, help="Print what one pass would delete; change nothing.")
@json_option
def retention_command(
    config_file: Path | None, overrides: tuple[str, ...], dry_run: bool, as_json: bool
) -> None:
    """Run one kafka-log-retention pass over every log now, offline.

    Non-compacted logs get retention as the scheduled task gives it; compacted logs too when
    log.cleaner.enable is true (Kafka's cleaner threads run theirs). Deleted files are removed before exit.
    SIGINT/SIGTERM stop the pass before the next partition (exit 130/143, saying where it stopped).
    """
    broker = load_config(config_file, overrides)
    stopped: InterruptedCommandError | None = None
    if dry_run:
        deleted = inspect_logs(
            broker, lambda manager, _copies: _retention_pass(manager, broker, dry_run=True)[0]
        )
    else:
        with interruptible() as interruption, offline_log_manager(broker) as manager:
            deleted, stopped_at = _retention_pass(manager, broker, dry_run=False, interruption=interruption)
            if stopped_at is not None and interruption.signum is not None:
                stopped = InterruptedCommandError(
                    f"interrupted by {interruption.signal_name} {stopped_at}, "
                    f"{counted(len(deleted), 'segment')} deleted; nothing is lost (each partition's "
                    "deletions are complete, the rest untouched): run retention again to finish the pass",
                    signum=interruption.signum,
                )
    if as_json:
        click.echo(dumps_indented(retention_document(deleted, dry_run=dry_run)))
    else:
        _print_retention(deleted, dry_run=dry_run)
    if stopped is not None:
        raise stopped


def _print_retention(deleted: list[DeletedSegment], *, dry_run: bool) -> None:
    verb = "would delete" if dry_run else "deleted"
    lines = [
        f"{verb} {d.topic}-{d.partition} segment {d.base_offset} ({d.size_bytes} bytes): {d.reason}"
        for d in deleted
    ]
    lines.append(f"{counted(len(deleted), 'segment')} {'would be deleted' if dry_run else 'deleted'}")
    click.echo("\n".join(lines))  # one write: a line each is 10,000 writes at a broker's worth


@click.command("explain")
@config_options
@click.option("--topic", help="Only this topic.")
@click.option("--partition", type=click.IntRange(min=0), help="Only this partition (needs --topic).")
@click.option(
    "--summary",
    is_flag=True,
    help="The whole broker instead: bytes held by reason, what retention and compaction would free.",
)
@click.option(
    "--exact",
    is_flag=True,
    help="With --summary: read the compacted logs' dirty sections to measure what cleaning frees.",
)
@json_option
def explain_command(
    config_file: Path | None,
    overrides: tuple[str, ...],
    topic: str | None,
    partition: int | None,
    summary: bool,
    exact: bool,
    as_json: bool,
) -> None:
    """Per partition and segment: what retention would do and why; the cleaner's view of the log.

    --summary: every log dir in one document, each byte of every partition under one reason
    (docs/bytes-held.md), with what a retention pass would delete now and what cleaning would free.
    """
    if partition is not None and topic is None:
        raise click.UsageError("--partition needs --topic")
    if exact and not summary:
        raise click.UsageError("--exact needs --summary")
    if summary and topic is not None:
        raise click.UsageError("--summary takes no --topic: it covers every log dir")
    broker = load_config(config_file, overrides, check_dirs=not summary)  # the summary reports them
    if summary:
        from service.shell.tools.summary_command import summary_lines, summary_of_log_dirs

        doc = summary_of_log_dirs(broker, inspect_logs, exact=exact)
        click.echo(dumps_indented(doc) if as_json else "\n".join(summary_lines(doc)))
        return

    def explain_share(manager: LogManager, copies: ScratchCopies) -> list[dict[str, object]]:
        docs = explain_partitions(
            manager, cleaner_enabled=broker.log_cleaner_enable, engine_choice=EngineChoice.of(broker)
        )
        if copies.copied:  # name the user's log dir, not the scratch copy's parent
            for doc in docs:
                doc["log_dir"] = str(copies.original_log_dir(Path(str(doc["log_dir"]))))
        return docs

    def explain_share_as_json(manager: LogManager, copies: ScratchCopies) -> list[tuple[int, str]]:
        """The share's partition count and its part of the document's array, written where it was made."""
        docs: list[object] = list(explain_share(manager, copies))
        return [(len(docs), dumps_indented_items(docs, depth=1))]

    def selects(tp: TopicPartition) -> bool:  # only the named partitions' dirs are read
        return tp.topic == topic and (partition is None or tp.partition == partition)

    selected = None if topic is None else selects
    if as_json:
        parts = inspect_logs(broker, explain_share_as_json, selected)
        _require_some(sum(count for count, _ in parts), topic, partition)
        ignored = {"ignored_broker_keys": list(broker.ignored_broker_keys)}
        document = indented_array_document("partitions", [text for _, text in parts], before=ignored)
        click.echo(document, nl=False)  # the line break apart: no copy of the whole document to add it
        click.echo()
        return
    now_ms = SystemClock().now_ms()  # as the inspection's: ages in words need no more precision
    docs = inspect_logs(broker, explain_share, selected)
    _require_some(len(docs), topic, partition)
    click.echo("\n".join(line for doc in docs for line in explanation_lines(doc, now_ms)))


def _require_some(partitions: int, topic: str | None, partition: int | None) -> None:
    """``explain --topic`` of no live partition is an error (exit 2), as ``explain_partitions`` says it."""
    if topic is not None and not partitions:
        where = f"topic {topic!r}" + (f" partition {partition}" if partition is not None else "")
        raise NotFoundError(f"no partition matches {where}")


@click.command("topic-config")
@config_options
@click.option("--topic", help="The topic (required unless --import).")
@click.option(
    "--set", "set_pairs", multiple=True, metavar="KEY=VALUE", help="Set a topic override (repeatable)."
)
@click.option(
    "--delete", "delete_keys", multiple=True, metavar="KEY", help="Remove a topic override (repeatable)."
)
@click.option(
    "--allow-missing-topic", is_flag=True, help="Accept a topic with no partition yet (about to be created)."
)
@click.option(
    "--import",
    "import_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Store as overrides, in one step, every topic's own configs (DYNAMIC_TOPIC_CONFIG) in FILE: the "
    "text kafka-configs.sh --describe [--all] --entity-type topics prints.",
)
@json_option
def topic_config_command(
    config_file: Path | None,
    overrides: tuple[str, ...],
    topic: str | None,
    set_pairs: tuple[str, ...],
    delete_keys: tuple[str, ...],
    allow_missing_topic: bool,
    import_file: Path | None,
    as_json: bool,
) -> None:
    """Show or change a topic's config overrides (Kafka's topic config names).

    Changes are stored durably in every log dir; a running daemon applies them within a second. --import
    takes over a cluster's topic configs from kafka-configs.sh's describe output (a ZooKeeper-era cluster,
    whose configs logcleaner cannot read otherwise).
    """
    broker = load_config(config_file, overrides)
    require_log_dirs(list(broker.log_dir_paths))
    if import_file is not None:
        if topic is not None or set_pairs or delete_keys:
            raise click.UsageError("--import takes no --topic, --set or --delete")
        _import_topic_configs(broker, import_file, as_json=as_json)
        return
    if topic is None:
        raise click.UsageError("--topic is required (or --import FILE)")
    if not allow_missing_topic and not _topic_exists(broker, topic):
        raise NotFoundError(
            f"topic {topic!r} has no partition in log.dirs {', '.join(broker.log_dirs)}"
            " (--allow-missing-topic for a topic about to be created)"
        )
    store = build_topic_store(broker)
    if set_pairs or delete_keys:
        changes = {}
        for pair in set_pairs:
            key, sep, value = pair.partition("=")
            if not sep:
                raise click.UsageError(f"--set {pair!r} is not of the form key=value")
            changes[key.strip()] = value.strip()
        store.update(topic, changes, list(delete_keys))
    from service.config.topic_config import describe_topic_config

    metadata = load_metadata(broker)
    topic_overrides = store.get(topic)
    entries = describe_topic_config(
        broker,
        topic_overrides,
        topic=topic,
        dynamic=metadata.dynamic_configs,
        configs_unknown=metadata.topic_configs_unknown(topic, known_to_logcleaner=store.has(topic)),
    )
    if as_json:
        click.echo(json.dumps(topic_config_document(topic, entries), indent=2))
        return
    for entry in entries.values():
        click.echo(f"{entry.name}={_kafka_text(entry.value)}  ({entry.source})")


def _import_topic_configs(broker: BrokerConfig, path: Path, *, as_json: bool) -> None:
    from service.config.configs_import import read_topic_configs_description

    imported = read_topic_configs_description(path)
    build_topic_store(broker).update_topics(imported.topics)
    skipped = [{"topic": t, "name": n, "reason": r} for t, n, r in imported.skipped]
    if as_json:
        click.echo(json.dumps({"imported": imported.topics, "skipped": skipped}, indent=2))
        return
    for topic, configs in sorted(imported.topics.items()):
        click.echo(f"{topic}: " + ", ".join(f"{k}={v}" for k, v in sorted(configs.items())))
    for entry in skipped:
        click.echo(f"skipped {entry['topic']} {entry['name']}: {entry['reason']}")


def _topic_exists(broker: BrokerConfig, topic: str) -> bool:
    """Whether some log dir holds a partition directory ``<topic>-<n>`` (read only, nothing created)."""
    prefix = f"{topic}-"
    for log_dir in broker.log_dir_paths:
        try:
            names = [entry.name for entry in os.scandir(log_dir) if entry.is_dir()]
        except OSError:
            continue
        if any(name.startswith(prefix) and name[len(prefix) :].isdigit() for name in names):
            return True
    return False


def _kafka_text(value: object) -> str:
    """A config value as Kafka's config tool prints it: booleans lower-case (``false``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)

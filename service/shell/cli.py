"""The ``logcleaner`` command line: one group, errors mapped to exit codes in one place.

Exit codes: 0 success (a daemon stopped by SIGTERM/SIGINT included), 2 bad usage or bad input, 1 any other
failure; errors go to stderr as one line. Only this module configures logging handlers (to stderr: stdout
is for ``--json``).
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import click

from service.base.audit import AUDIT_LOGGER_NAME
from service.base.errors import (
    ConflictError,
    InterruptedCommandError,
    InvalidInputError,
    LogCleanerError,
    NotFoundError,
)
from service.core.collector import collector_paused
from service.core.version import version_line
from service.shell.process_exit import skip_teardown
from service.shell.tools.log_commands import (
    config_options,
    explain_command,
    load_config,
    retention_command,
    topic_config_command,
)
from service.storage.prescan import start_early_prescans

__all__ = ["cli", "main"]

EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED_BY_SIGINT = 130  # the shell's 128 + SIGINT


class _CommandGroup(click.Group):
    """A group whose heavier commands are imported when they are named, not when the CLI starts: an
    ``explain`` or ``retention`` over a broker's worth of logs does not pay for the cleaner's, ``dump``'s
    and ``gen``'s imports (≈ 60 ms). ``--help`` lists them all (and imports them for their summaries)."""

    _BY_IMPORT: ClassVar[dict[str, tuple[str, str]]] = {
        "clean": ("service.shell.tools.clean_command", "clean_command"),
        "dump": ("service.shell.tools.dump", "dump_command"),
        "gen": ("service.shell.tools.gen_command", "gen_command"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._BY_IMPORT})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self._BY_IMPORT:
            module, name = self._BY_IMPORT[cmd_name]
            command: click.Command = getattr(importlib.import_module(module), name)
            return command
        return super().get_command(ctx, cmd_name)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_line())
        ctx.exit()


@click.group(cls=_CommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-v info, -vv debug).")
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the version and the Kafka log format it writes, and exit.",
)
def cli(verbose: int) -> None:
    """logcleaner: Kafka's log management (retention, compaction, checkpoints) on Kafka's own files."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # APScheduler reports every job run at INFO; ours are counted per job instead (-vv shows them).
    logging.getLogger("apscheduler").setLevel(logging.DEBUG if verbose >= 2 else logging.WARNING)
    # py4j (Spark's bridge) logs each connection at INFO and every message it passes at DEBUG: -vv shows
    # the former. Spark's JVM output is routed in cleaner.spark.session.
    logging.getLogger("py4j").setLevel(logging.INFO if verbose >= 2 else logging.WARNING)


@cli.command()
@config_options
@click.option(
    "-q", "--quiet", is_flag=True, help="No start-up, shutdown or audit-trail lines (warnings only)."
)
def serve(config_file: Path | None, overrides: tuple[str, ...], quiet: bool) -> None:
    """Run the daemon: load and recover every log under log.dirs, run Kafka's scheduled log tasks.

    SIGTERM/SIGINT shut it down cleanly (checkpoints and the clean-shutdown marker written, exit 0)
    within shutdown.timeout.ms; past it, on a second signal, or on a signal while the logs still load,
    exit 1 without the marker. A failed start exits 1 having changed nothing. Prints a start-up and a
    shutdown line, and one audit-trail line (logger logcleaner.audit) per action that changes data,
    unless -q.
    """
    broker = load_config(config_file, overrides)
    # A clean dir's partition dirs are scanned (in C, the GIL released) while the API is imported and built.
    prescans = start_early_prescans(broker.log_dir_paths)
    # Start-up only adds long-lived objects (the API's modules, then the logs): no cyclic collection until
    # it is done, and what it made is frozen out of later collections' view.
    with collector_paused(freeze=True):
        try:
            from service.shell.daemon import Daemon  # the API, scheduler and cleaner: for serve alone

            if not quiet:  # the daemon's own lines and the audit trail at INFO even without -v
                for name in ("service.shell.daemon", AUDIT_LOGGER_NAME):
                    logging.getLogger(name).setLevel(min(logging.getLogger().level, logging.INFO))
            daemon = Daemon(broker, prescans=prescans)
            daemon.install_signal_handlers()  # a stop while the logs load interrupts the loading
            daemon.start()
        finally:
            prescans.close()  # what the start-up did not take over (it failed before the logs loaded)
    try:
        daemon.run_until_stopped()
    finally:
        daemon.shutdown()
    skip_teardown()  # every log closed, the marker written: nothing left to free


for command in (retention_command, explain_command, topic_config_command):
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; map our errors to exit codes with a one-line message on stderr."""
    try:
        result = cli.main(
            args=list(argv) if argv is not None else None, prog_name="logcleaner", standalone_mode=False
        )
    except click.exceptions.Abort:  # Ctrl-C in a command that does not stop at a safe point itself
        click.echo("logcleaner: interrupted by SIGINT", err=True)
        return EXIT_INTERRUPTED_BY_SIGINT
    except click.ClickException as exc:
        click.echo(f"logcleaner: error: {exc.format_message()}", err=True)
        return EXIT_BAD_INPUT if exc.exit_code == 2 else exc.exit_code
    except InterruptedCommandError as exc:
        click.echo(f"logcleaner: {exc}", err=True)
        return exc.exit_code
    except (InvalidInputError, NotFoundError, ConflictError) as exc:
        click.echo(f"logcleaner: error: {exc}", err=True)
        return EXIT_BAD_INPUT
    except LogCleanerError as exc:
        click.echo(f"logcleaner: error: {exc}", err=True)
        return EXIT_BAD_INPUT if isinstance(exc, ValueError) else EXIT_FAILURE
    except OSError as exc:
        click.echo(f"logcleaner: error: {exc}", err=True)
        return EXIT_FAILURE
    return result if isinstance(result, int) else 0

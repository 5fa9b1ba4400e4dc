"""Spark's JVM output goes through our logging, not straight to the terminal.

The driver JVM (and the Python workers it forks) write to their stderr: the JDK's "Using incubator
modules" warning, log4j's lines, a Python worker's traceback. PySpark lets that stderr through to the
terminal, past our log format and our ``-v`` levels. So the gateway is launched with its stderr piped,
log4j is configured (``log4j2.properties`` in the session's scratch dir, through
``spark.driver.extraJavaOptions``) to log at WARN as ``LEVEL category: message``, and a daemon thread turns
each line into a record of the ``cleaner.spark.jvm`` logger at the line's own level. Start-up chatter that
says nothing an operator can act on (``NOISE``) is logged at DEBUG: it shows with ``-vv`` only.
"""

from __future__ import annotations

import logging
import re
import subprocess
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO

__all__ = [
    "NOISE",
    "LOG4J_PROPERTY",
    "JvmOutputForwarder",
    "line_level",
    "with_log4j_config",
    "write_log4j_config",
]

logger = logging.getLogger("cleaner.spark.jvm")

LOG4J_PROPERTY = "-Dlog4j.configurationFile="
_JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"

# Lines that are there on every start and ask nothing of the operator.
NOISE = (
    "WARNING: Using incubator modules",  # the JDK, for Spark's jdk.incubator.vector
    "Using Spark's default log4j profile",
    'Setting default log level to "WARN"',
    "To adjust logging level use sc.setLogLevel",
    "NativeCodeLoader: Unable to load native-hadoop library",  # Hadoop's pure-Java code is used
    "Picked up JAVA_TOOL_OPTIONS",
)
_LOG4J_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}
_LEVEL_PREFIX = re.compile(r"^(?:\S+ \S+ )?(TRACE|DEBUG|INFO|WARN|ERROR|FATAL)\b")
# A stack trace's lines go with the line that began it.
_CONTINUATION = re.compile(r"^(?:\s|Caused by:|\.\.\. \d+ more)")

_LOG4J2_PROPERTIES = """\
# logcleaner: Spark's driver logs at WARN, one line each, to stderr, which logcleaner reads and logs.
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %p %c{1}: %m%n%ex
"""


def write_log4j_config(scratch: str) -> str:
    """Write the driver's log4j2 configuration into ``scratch``; return its path."""
    path = Path(scratch) / "log4j2.properties"
    path.write_text(_LOG4J2_PROPERTIES, encoding="utf-8")
    return str(path)


def with_log4j_config(conf: Mapping[str, str], config_path: str) -> dict[str, str]:
    """``conf`` with our log4j configuration added to the driver's Java options, unless it names its own."""
    merged = dict(conf)
    options = merged.get(_JAVA_OPTIONS_KEY, "")
    if LOG4J_PROPERTY not in options:
        merged[_JAVA_OPTIONS_KEY] = f"{options} {LOG4J_PROPERTY}{config_path}".strip()
    return merged


def line_level(line: str, previous: int | None) -> int:
    """The level to log one line of the JVM's stderr at (``previous``: the level of the line before)."""
    if any(noise in line for noise in NOISE):
        return logging.DEBUG
    if previous is not None and _CONTINUATION.match(line):
        return previous
    match = _LEVEL_PREFIX.match(line)
    if match:
        return _LOG4J_LEVELS[match.group(1)]
    return logging.WARNING  # anything else (a worker's traceback, the JVM's own warnings) is worth seeing


class JvmOutputForwarder:
    """A daemon thread that logs each line the JVM writes to the pipe it reads, until the JVM exits."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._thread = threading.Thread(target=self._run, name="logcleaner-spark-jvm-output", daemon=True)

    @classmethod
    def start_for(cls, proc: subprocess.Popen[bytes] | None) -> JvmOutputForwarder | None:
        """Forward ``proc``'s piped stderr; None when there is none (a JVM this process did not start,
        as under ``spark-submit``, keeps its output as it is)."""
        if proc is None or proc.stderr is None:
            return None
        forwarder = cls(proc.stderr)
        forwarder._thread.start()
        return forwarder

    def join(self, timeout_s: float) -> None:
        """Wait until the JVM's stderr closes and every line is logged (tests: the JVM lives as we do)."""
        self._thread.join(timeout_s)

    def _run(self) -> None:
        with self._stream:  # closed at the JVM's end
            forward_lines(raw.decode("utf-8", "replace").rstrip("\r\n") for raw in self._stream)


def forward_lines(lines: Iterable[str]) -> None:
    """Log each line at its level (see ``line_level``); blank lines are dropped."""
    previous: int | None = None
    for line in lines:
        if not line.strip():
            continue
        previous = line_level(line, previous)
        logger.log(previous, "%s", line)

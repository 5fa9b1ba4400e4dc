"""The process's SparkSession, and its JVM's output through our logging.

The process's one SparkSession for compaction: started at first use, stopped at exit or on ``stop``.

Starting Spark costs seconds (a JVM, then Python workers), a small job a fraction of one, so a process
keeps one session for its whole life and every cleaner worker shares it. Workers submit jobs at the same
time: the FAIR scheduler gives each its own pool (``pool_name``; ``POOLS`` of them declared, weight 1,
FIFO inside), so one large log does not hold the others' jobs back.

Before the JVM starts, the environment is made to work out of the box (each only if unset):
``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` = this interpreter, so workers import our packages and
pyarrow; ``SPARK_WORKER_DIR`` = a temporary dir (removed on ``stop``), or ``local-cluster`` executors
write into the installed package; for ``local``/``local-cluster`` masters, ``SPARK_LOCAL_IP=127.0.0.1``
(on a real cluster the executors must reach the driver, so it is left to the operator there). Spark logs
at WARN, through our logging (below: its start-up chatter at DEBUG); its console progress bar and
web UI are off unless ``spark.ui.*`` says otherwise.

Spark's JVM output goes through our logging, not straight to the terminal.

The driver JVM (and the Python workers it forks) write to their stderr: the JDK's "Using incubator
modules" warning, log4j's lines, a Python worker's traceback. PySpark lets that stderr through to the
terminal, past our log format and our ``-v`` levels. So the gateway is launched with its stderr piped,
log4j is configured (``log4j2.properties`` in the session's scratch dir, through
``spark.driver.extraJavaOptions``) to log at WARN as ``LEVEL category: message``, and a daemon thread turns
each line into a record of the ``cleaner.spark.jvm`` logger at the line's own level. Start-up chatter that
says nothing an operator can act on (``NOISE``) is logged at DEBUG: it shows with ``-vv`` only.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_SPARK_CONF",
    "JvmOutputForwarder",
    "LOG4J_PROPERTY",
    "NOISE",
    "POOLS",
    "SparkSessionHolder",
    "line_level",
    "pool_name",
    "with_log4j_config",
    "write_log4j_config",
]

logger = logging.getLogger(__name__)

DEFAULT_SPARK_CONF: Mapping[str, str] = {
    "spark.master": "local[*]",
    "spark.app.name": "logcleaner",
    "spark.scheduler.mode": "FAIR",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Python workers fork from a daemon that has already imported the tasks' modules (worker_daemon).
    "spark.python.daemon.module": "cleaner.spark.worker_daemon",
    # The driver JVM only schedules tasks and moves small rows (the records are handled in C, in Python
    # workers): its optimizing compiler (C2) would spend a core for minutes after the start compiling that
    # code, while the rounds run (measured: rounds 0.86-1.23 s with it, 0.79-0.90 s without; the
    # benchmarks' section "issue 10, a map's puts on their own thread"). A setting of the operator's own
    # replaces this one.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
    # An executor and its Python workers talk over a Unix domain socket, not TCP on loopback (measured:
    # 200 empty tasks on local[2] took 48-52 ms a task over TCP, 25 ms over a Unix socket, 4-6 ms with the
    # worker daemon's objects also frozen; the benchmarks' section "issue 10, a Spark task's fixed cost").
    # Executors and their workers always share a machine.
    "spark.python.unix.domain.socket.enabled": "true",
}
# Two attempts of one task would write the same .cleaned files: never run speculative copies.
_FORCED_CONF: Mapping[str, str] = {"spark.speculation": "false"}
POOLS = 16  # pools declared for workers 0..15; a later worker's pool is created on the fly (Spark warns)
_POOL_XML = (
    '<pool name="{}"><schedulingMode>FIFO</schedulingMode><weight>1</weight><minShare>0</minShare></pool>'
)


CLEANER_JOB_TAG = "logcleaner-cleaner"
"""The Spark job tag every cleaning job carries (beside its round's own): the jobs ``stop`` cancels."""


def pool_name(thread_id: int) -> str:
    """The FAIR scheduler pool of cleaner worker ``thread_id``."""
    return f"logcleaner-cleaner-{thread_id}"


class SparkSessionHolder:
    """Starts the session on the first ``get``; ``stop`` ends it (also registered with ``atexit``).

    ``_lock`` guards ``_session`` and ``_scratch`` (the temporary dir of the worker dir and the pool file):
    workers may ask for the session concurrently, and only one may start it. The ``kafka-log`` data source
    is not registered: the cleaner does not read through it, and a registration starts PySpark's own
    worker daemon to look up installed data sources (``pyspark.daemon``, not ``worker_daemon``), whose
    idle worker then prints a ``BrokenPipeError`` traceback when Spark lets it go a minute later.
    """

    def __init__(self, conf: Mapping[str, str] | None = None) -> None:
        merged = dict(DEFAULT_SPARK_CONF)
        merged.update(conf or {})
        for key, value in _FORCED_CONF.items():
            if merged.get(key, value) != value:
                logger.warning("Ignoring %s=%s: the cleaner needs %s", key, merged[key], value)
            merged[key] = value
        self.conf: Mapping[str, str] = merged
        self._lock = threading.Lock()
        self._session: SparkSession | None = None
        self._scratch: str | None = None
        self._atexit_registered = False
        self._starting = False  # written under _lock: a start is in flight
        self._stop_pending = False  # a stop came during a start: the start stops what it started

    @property
    def is_started(self) -> bool:
        """Read without ``_lock`` (an atomic reference read), so it never waits for a start in flight."""
        return self._session is not None

    def get(self) -> SparkSession:
        """The session, started at the first call (later callers wait for that start)."""
        with self._lock:
            if self._session is None:
                self._scratch = tempfile.mkdtemp(prefix="logcleaner-spark-")
                self._starting = True
                try:
                    self._session = self._start(self._scratch)
                except BaseException:
                    shutil.rmtree(self._scratch, ignore_errors=True)
                    self._scratch = None
                    self._stop_pending = False
                    raise
                finally:
                    self._starting = False
                if self._stop_pending:
                    self._stop_locked()
                    raise RuntimeError("the SparkSession was stopped while it started")
            return self._session

    def stop(self) -> None:
        """Stop the session; during a start, without waiting for it (the start then stops it itself)."""
        if not self._lock.acquire(blocking=False):
            if self._starting:
                self._stop_pending = True
                if self._starting:  # still starting: it will see the flag once it has started
                    return
            self._lock.acquire()
        try:
            self._stop_locked()
        finally:
            self._lock.release()

    def _stop_locked(self) -> None:
        self._stop_pending = False
        session, self._session = self._session, None
        scratch, self._scratch = self._scratch, None
        if session is not None:
            logger.info("Stopping the SparkSession (master %s)", self.conf["spark.master"])
            _cancel_cleaner_jobs(session)
            session.stop()
        if scratch is not None:
            if os.environ.get("SPARK_WORKER_DIR", "").startswith(scratch):
                del os.environ["SPARK_WORKER_DIR"]
            shutil.rmtree(scratch, ignore_errors=True)

    def _start(self, scratch: str) -> SparkSession:
        self._prepare_environment(scratch)
        from pyspark.sql import SparkSession

        logger.info("Starting a SparkSession (master %s)", self.conf["spark.master"])
        conf = with_log4j_config(self.conf, write_log4j_config(scratch))
        conf.setdefault("spark.scheduler.allocation.file", _write_pools(scratch))
        _launch_gateway(conf)
        builder = SparkSession.builder
        for key, value in conf.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("WARN")
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        return session

    def _prepare_environment(self, scratch: str) -> None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if self.conf["spark.master"].startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("SPARK_WORKER_DIR", os.path.join(scratch, "work"))


def _cancel_cleaner_jobs(session: SparkSession) -> None:
    """``serve`` stops: no round outlives it. A context another user of the JVM stopped already has no jobs
    left to cancel (nor a JVM side to ask)."""
    context = session.sparkContext
    if getattr(context, "_jsc", None) is not None:
        context.cancelJobsWithTag(CLEANER_JOB_TAG)


def _launch_gateway(conf: Mapping[str, str]) -> None:
    """Start the driver JVM with its stderr piped into our logging, unless this process already has one
    (a session started and stopped before, or one of the caller's own: those keep their output as it is)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return
        spark_conf = SparkConf(loadDefaults=False).setAll(list(conf.items()))
        # PySpark's launcher is untyped; popen_kwargs is its documented way to capture the JVM's output.
        gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
        JvmOutputForwarder.start_for(gateway.proc)
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm


def _write_pools(scratch: str) -> str:
    """The FAIR scheduler's allocation file: one pool per cleaner worker."""
    path = os.path.join(scratch, "fairscheduler.xml")
    pools = "".join(_POOL_XML.format(pool_name(i)) for i in range(POOLS))
    with open(path, "w", encoding="utf-8") as file:
        file.write(f'<?xml version="1.0"?><allocations>{pools}</allocations>')
    return path


jvm_logger = logging.getLogger("cleaner.spark.jvm")

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
        jvm_logger.log(previous, "%s", line)

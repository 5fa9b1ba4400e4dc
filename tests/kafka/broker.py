"""A real Apache Kafka broker for the tests: one KRaft node that is both broker and controller, formatted with
Kafka's storage tool, on free 127.0.0.1 ports, with a small heap, its log4j output in a file the tests read,
and stopped cleanly (SIGTERM, then a kill after a timeout) whatever happens to the test."""

from __future__ import annotations

import atexit
import base64
import re
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.kafka.distribution import KafkaDistribution

__all__ = [
    "BrokerError",
    "KafkaBroker",
    "java_command",
    "kafka_jvm_flags",
    "run_java_tool",
    "write_log_config",
]

JVM_FLAGS = (
    "-Xms64m",
    "-Xmx384m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",  # C1 only: a test broker lives seconds, start-up time is what counts
    "-Xshare:auto",
    "-Djava.awt.headless=true",
)
STARTED_LINE = "Kafka Server started"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0

LOG_PATTERN = "[%d] %p %m (%c)%n"

LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="server" fileName="{path}" append="true">
      <PatternLayout pattern="{pattern}"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="server"/></Root>
  </Loggers>
</Configuration>
"""

LOG4J1_PROPERTIES = """log4j.rootLogger=INFO, server
log4j.appender.server=org.apache.log4j.FileAppender
log4j.appender.server.File={path}
log4j.appender.server.Append=true
log4j.appender.server.layout=org.apache.log4j.PatternLayout
log4j.appender.server.layout.ConversionPattern={pattern}
"""


class BrokerError(RuntimeError):
    """The broker or one of Kafka's tools failed; the message holds the tail of its log."""


_running: set[KafkaBroker] = set()


@atexit.register
def _stop_every_broker() -> None:
    """A broker outlives no test run, even one that ends without its fixtures' finalizers."""
    for broker in list(_running):
        broker.stop(check=False)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def random_cluster_id() -> str:
    """A cluster id as Kafka's ``Uuid.randomUuid().toString()`` prints one: URL-safe base64, no padding, and
    never starting with ``-`` (Kafka's ``Uuid.randomUuid`` redraws one; kafka-storage's argument parser would
    read it as an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not cluster_id.startswith("-"):
            return cluster_id


def kafka_jvm_flags(heap: str) -> tuple[str, ...]:
    """kafka-server-start.sh's heap options (``heap`` instead of 1g) and kafka-run-class.sh's performance
    options."""
    return (
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-server",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent",
        "-Djava.awt.headless=true",
    )


def java_command(
    distribution: KafkaDistribution,
    main_class: str,
    *args: str,
    log_config: Path,
    jvm_flags: Sequence[str] = JVM_FLAGS,
) -> list[str]:
    """``java`` with the release's classpath and the log config of its log4j generation."""
    logging_flag = (
        f"-Dlog4j2.configurationFile={log_config}"
        if distribution.uses_log4j2
        else f"-Dlog4j.configuration=file:{log_config}"
    )
    return ["java", *jvm_flags, logging_flag, "-cp", distribution.classpath, main_class, *args]


def write_log_config(distribution: KafkaDistribution, directory: Path, log_file: Path) -> Path:
    """A log4j config (log4j2 from Kafka 4.0, log4j 1 before) sending everything at INFO to ``log_file``."""
    if distribution.uses_log4j2:
        path = directory / "log4j2.xml"
        path.write_text(LOG4J2_XML.format(path=log_file, pattern=LOG_PATTERN))
    else:
        path = directory / "log4j.properties"
        path.write_text(LOG4J1_PROPERTIES.format(path=log_file, pattern=LOG_PATTERN))
    return path


def run_java_tool(
    distribution: KafkaDistribution, main_class: str, *args: str, log_config: Path, timeout_s: float = 300.0
) -> subprocess.CompletedProcess[str]:
    """One of Kafka's tools in its own JVM; :class:`BrokerError` with its output if it exits non-zero."""
    command = java_command(distribution, main_class, *args, log_config=log_config)
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout_s)
    if done.returncode != 0:
        raise BrokerError(
            f"{main_class} {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        )
    return done


class KafkaBroker:
    """One KRaft broker+controller under ``home``: ``home/data`` is its only log dir (and its metadata log
    dir), ``home/server.log`` its log4j output. ``properties`` add to or replace the test defaults;
    ``jvm_flags`` replace the quick-start ones (a benchmark wants Kafka's own)."""

    def __init__(
        self,
        distribution: KafkaDistribution,
        home: Path,
        properties: Mapping[str, str] | None = None,
        *,
        jvm_flags: Sequence[str] = JVM_FLAGS,
    ) -> None:
        self.distribution = distribution
        self.jvm_flags = tuple(jvm_flags)
        self.home = home
        self.log_dir = home / "data"
        self.server_log = home / "server.log"
        self.port = free_port()
        self.controller_port = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._log_offset_at_start = 0
        home.mkdir(parents=True, exist_ok=True)
        self._properties_file = home / "server.properties"
        self._properties = {**self.default_properties(), **(properties or {})}
        self._write_properties()
        self._log_config = write_log_config(distribution, home, self.server_log)

    def _write_properties(self) -> None:
        self._properties_file.write_text("".join(f"{k}={v}\n" for k, v in self._properties.items()))

    def update_properties(self, properties: Mapping[str, str]) -> None:
        """Change ``server.properties`` for the next start (the broker must be stopped)."""
        if self._process is not None:
            raise BrokerError("stop the broker before changing its server.properties")
        self._properties.update(properties)
        self._write_properties()

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def default_properties(self) -> dict[str, str]:
        """A one-node cluster that starts in seconds on two cores; the broker's own cleaner and retention
        stay out of the way unless a test asks for them, so what changed the files is logcleaner."""
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "2",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "2",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "1",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            # A log's dirty ratio never exceeds 1 (Kafka cleans above the minimum, LogCleanerManager), so
            # the broker's cleaner cleans nothing; log.cleaner.enable=false warns of deprecation in 4.x.
            "log.cleaner.min.cleanable.ratio": "1.0",
            "log.retention.check.interval.ms": "3600000",
        }

    def format(self) -> None:
        """``kafka-storage.sh format`` with a fresh cluster id."""
        run_java_tool(
            self.distribution,
            self.distribution.storage_tool_class,
            "format",
            "--cluster-id",
            random_cluster_id(),
            "--config",
            str(self._properties_file),
            log_config=self._log_config,
        )

    def start(self) -> None:
        """Launch the broker and wait until it says it has started."""
        if self._process is not None:
            raise BrokerError("the broker is already running")
        self._log_offset_at_start = self.server_log.stat().st_size if self.server_log.exists() else 0
        command = java_command(
            self.distribution,
            "kafka.Kafka",
            str(self._properties_file),
            log_config=self._log_config,
            jvm_flags=self.jvm_flags,
        )
        with open(self.home / "stdout.log", "ab") as output:
            self._process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        _running.add(self)
        deadline = time.monotonic() + START_TIMEOUT_S
        while STARTED_LINE not in self.log_since_start():
            if self._process.poll() is not None:
                code = self._process.returncode
                self._forget()
                raise BrokerError(f"the broker exited with {code} during start-up:\n{self._tail()}")
            if time.monotonic() > deadline:
                self.stop(check=False)
                raise BrokerError(f"the broker did not start within {START_TIMEOUT_S} s:\n{self._tail()}")
            time.sleep(0.1)

    def stop(self, *, check: bool = True) -> None:
        """SIGTERM and wait for a clean exit; a broker still running after the timeout is killed, which
        ``check`` reports as an error (it left no clean-shutdown marker)."""
        process = self._process
        if process is None:
            return
        try:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired as exc:
                process.kill()
                process.wait()
                if check:
                    message = f"the broker ignored SIGTERM for {STOP_TIMEOUT_S} s:\n{self._tail()}"
                    raise BrokerError(message) from exc
            if check and process.returncode not in (0, 143):
                raise BrokerError(f"the broker exited with {process.returncode}:\n{self._tail()}")
        finally:
            self._forget()

    def restart(self) -> None:
        self.stop()
        self.start()

    def _forget(self) -> None:
        self._process = None
        _running.discard(self)

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_since_start(self) -> str:
        """What the broker logged since its last start."""
        if not self.server_log.exists():
            return ""
        with open(self.server_log, "rb") as log:
            log.seek(self._log_offset_at_start)
            return log.read().decode("utf-8", "replace")

    def log_lines_since_start(self, level_pattern: str) -> list[str]:
        """The lines since the last start whose level matches ``level_pattern`` (e.g. ``WARN|ERROR``)."""
        line_start = re.compile(rf"^\[[^\]]+\] (?:{level_pattern}) ")
        return [line for line in self.log_since_start().splitlines() if line_start.match(line)]

    def _tail(self, lines: int = 60) -> str:
        text = self.log_since_start() or ""
        stdout = self.home / "stdout.log"
        if stdout.exists():
            text += stdout.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

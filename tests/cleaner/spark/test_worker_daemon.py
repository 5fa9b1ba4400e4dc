"""A task's Python worker: forked from ``worker_daemon`` with its objects frozen, on a Unix domain socket.

Both keep a task's fixed cost small: PySpark collects garbage after every task, and over loopback TCP each
task waited tens of milliseconds (``session.DEFAULT_SPARK_CONF``). A worker whose executor closes its
socket ends without a traceback.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
from functools import partial
from pathlib import Path
from subprocess import PIPE

import pytest

from cleaner.spark.session import SparkSessionHolder
from tests.cleaner.spark.worker_state import worker_state
from tests.service.stop_helpers import wait_until


def test_a_task_runs_in_a_worker_whose_preloaded_modules_the_collector_skips(
    spark_holder: SparkSessionHolder,
) -> None:
    context = spark_holder.get().sparkContext
    states = context.parallelize(range(2), 2).mapPartitionsWithIndex(worker_state).collect()
    assert len(states) == 2
    for frozen, namespace_frozen, _socket, preloaded in states:
        assert preloaded
        assert namespace_frozen, "the preloaded module's namespace is left to each collection"
        assert frozen > 10_000, f"{frozen} objects frozen"  # 35,000 with the cleaner's modules


def test_a_task_talks_to_its_executor_over_a_unix_domain_socket(spark_holder: SparkSessionHolder) -> None:
    context = spark_holder.get().sparkContext
    states = context.parallelize(range(2), 2).mapPartitionsWithIndex(worker_state).collect()
    assert {socket for _frozen, _namespace, socket, _preloaded in states} == {"true"}


def closed_idle_workers_stderr(daemon_module: str, sock_dir: Path, workers: int = 3) -> str:
    """Run ``daemon_module`` as an executor runs it (a Unix domain socket), have it fork ``workers``
    workers, close each one's socket while it waits for a task (what the executor does to a worker idle
    for a minute, and to all at its stop), wait until they have ended, then end the daemon; its stderr."""
    env = dict(
        os.environ,
        PYTHON_UNIX_DOMAIN_ENABLED="true",
        PYTHON_WORKER_FACTORY_SOCK_DIR=str(sock_dir),
        PYTHON_DAEMON_KILL_WORKER_ON_FLUSH_FAILURE="true",
        SPARK_REUSE_WORKER="1",
    )
    command = [sys.executable, "-m", daemon_module]
    with subprocess.Popen(command, env=env, stdin=PIPE, stdout=PIPE, stderr=PIPE) as daemon:
        assert daemon.stdin is not None and daemon.stdout is not None and daemon.stderr is not None
        try:
            (length,) = struct.unpack(">i", daemon.stdout.read(4))
            path = daemon.stdout.read(length).decode()
            pids = []
            for _ in range(workers):
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as executor_end:
                    executor_end.settimeout(30)
                    executor_end.connect(path)
                    pids.append(struct.unpack(">i", executor_end.recv(4))[0])  # the forked worker's
            for pid in pids:
                wait_until(partial(is_gone, pid), f"worker {pid} to end once its socket closed")
            daemon.stdin.close()  # the executor's end: the daemon stops
            return daemon.stderr.read().decode()
        finally:
            daemon.kill()


def is_gone(pid: int) -> bool:
    """Whether process ``pid`` has exited and its parent (the daemon) has reaped it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize(
    ("daemon_module", "tracebacks"),
    [("pyspark.daemon", 3), ("cleaner.spark.worker_daemon", 0)],  # PySpark's own: the case is reproduced
)
def test_a_worker_whose_executor_closed_its_socket_ends_without_a_traceback(
    tmp_path: Path, daemon_module: str, tracebacks: int
) -> None:
    stderr = closed_idle_workers_stderr(daemon_module, tmp_path)
    assert stderr.count("Traceback") == tracebacks, stderr


_SESSION_DAEMONS = """
import json, os
from pyspark import SparkContext
from cleaner.spark.session import SparkSessionHolder
holder = SparkSessionHolder({"spark.master": "local[2]"})
holder.get().sparkContext.parallelize(range(2), 2).map(abs).collect()
jvm = SparkContext._gateway.proc.pid
children = []
for name in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{name}/stat") as stat:
            parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{name}/cmdline", "rb") as cmdline:
            args = cmdline.read().decode().split("\\0")
    except OSError:
        continue
    if parent == jvm:
        children.append(args)
holder.stop()
print(json.dumps(children))
"""


def test_the_cleaners_session_starts_no_python_daemon_but_its_own() -> None:
    """Only ``worker_daemon`` runs under the session's JVM: registering a data source would start PySpark's
    own daemon too, whose idle worker prints a traceback a minute later (``SparkSessionHolder``)."""
    done = subprocess.run(
        [sys.executable, "-c", _SESSION_DAEMONS], capture_output=True, text=True, timeout=300, check=True
    )
    children = json.loads(done.stdout.strip().splitlines()[-1])
    modules = [args[args.index("-m") + 1] for args in children if "-m" in args]
    assert modules == ["cleaner.spark.worker_daemon"], children

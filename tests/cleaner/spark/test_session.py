"""Spark's JVM output reaches the terminal only through our logging; its start-up chatter with -vv only."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cleaner.spark.session import (
    LOG4J_PROPERTY,
    JvmOutputForwarder,
    SparkSessionHolder,
    forward_lines,
    line_level,
    with_log4j_config,
)
from tests.paths import REPO

# What a Spark start used to print straight to the terminal, whatever -v said.
CHATTER = (
    "Using incubator modules",
    "log4j",
    "setLogLevel",
    "NativeCodeLoader",
    "Closing down clientserver connection",
)
GEN_SHAPE = ("--segment-bytes", "100000", "--cleanup-policy", "compact")
ON_SPARK = ("--override", "log.cleaner.engine=spark", "--override", "spark.master=local[1]")
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+: ")


def test_start_up_chatter_is_debug_and_log4j_levels_are_kept(caplog: pytest.LogCaptureFixture) -> None:
    lines = [
        "WARNING: Using incubator modules: jdk.incubator.vector",
        "WARN NativeCodeLoader: Unable to load native-hadoop library for your platform... using builtin-java",
        "26/11/25 10:08:09 WARN BlockManager: Block rdd_1_0 could not be removed",
        "ERROR Executor: Exception in task 0.0 in stage 1.0 (TID 1)",
        "java.lang.IllegalStateException: boom",
        "\tat org.apache.spark.Foo.bar(Foo.scala:1)",
        "Caused by: java.io.IOException: disk",
        "",
        "Traceback (most recent call last):",
        "INFO SparkContext: Running Spark version 4.3.0",
    ]
    with caplog.at_level(logging.DEBUG, logger="cleaner.spark.jvm"):
        forward_lines(lines)
    got = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert got == [
        (logging.DEBUG, lines[0]),
        (logging.DEBUG, lines[1]),
        (logging.WARNING, lines[2]),
        (logging.ERROR, lines[3]),
        (logging.WARNING, lines[4]),  # a line of its own: no level, not a continuation
        (logging.WARNING, lines[5]),  # the trace goes with the line before
        (logging.WARNING, lines[6]),
        (logging.WARNING, lines[8]),
        (logging.INFO, lines[9]),
    ]
    assert line_level("\tat Foo.bar(Foo.scala:1)", logging.ERROR) == logging.ERROR


def test_a_child_process_stderr_is_logged_line_by_line(caplog: pytest.LogCaptureFixture) -> None:
    script = "echo 'WARNING: Using incubator modules: jdk.incubator.vector' >&2; echo 'ERROR Foo: bar' >&2"
    proc = subprocess.Popen(["sh", "-c", script], stderr=subprocess.PIPE)
    with caplog.at_level(logging.DEBUG, logger="cleaner.spark.jvm"):
        forwarder = JvmOutputForwarder.start_for(proc)
        assert forwarder is not None
        proc.wait(timeout=10)
        forwarder.join(timeout_s=10)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("DEBUG", "WARNING: Using incubator modules: jdk.incubator.vector"),
        ("ERROR", "ERROR Foo: bar"),
    ]
    assert JvmOutputForwarder.start_for(None) is None, "a JVM we did not start keeps its output"


def test_log4j_config_joins_the_driver_options_unless_one_is_named() -> None:
    conf = with_log4j_config({"spark.driver.extraJavaOptions": "-Xss4m"}, "/s/log4j2.properties")
    assert conf["spark.driver.extraJavaOptions"] == f"-Xss4m {LOG4J_PROPERTY}/s/log4j2.properties"
    own = {"spark.driver.extraJavaOptions": f"{LOG4J_PROPERTY}/etc/mine.properties"}
    assert with_log4j_config(own, "/s/log4j2.properties") == own


def test_the_driver_jvm_skips_its_optimizing_compiler_unless_options_are_given() -> None:
    """It only schedules tasks: C2 would spend a core on compiling during the first rounds."""
    key = "spark.driver.extraJavaOptions"
    assert SparkSessionHolder().conf[key] == "-XX:TieredStopAtLevel=1"
    assert SparkSessionHolder({key: "-Xss4m"}).conf[key] == "-Xss4m"


def run_spark_clean(tmp_path: Path, *verbosity: str) -> str:
    log_dir = tmp_path / "logs"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    logcleaner = [sys.executable, "-m", "service"]
    subprocess.run(
        [*logcleaner, "gen", "--log-dir", str(log_dir), "--records", "2000", "--keys", "100", *GEN_SHAPE],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        [*logcleaner, *verbosity, "clean", "--override", f"log.dirs={log_dir}", *ON_SPARK],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "1 partition cleaned" in done.stdout
    return done.stderr


@pytest.mark.slow
def test_a_spark_clean_prints_no_jvm_chatter(tmp_path: Path) -> None:
    stderr = run_spark_clean(tmp_path)
    for chatter in CHATTER:
        assert chatter not in stderr, stderr
    strays = [line for line in stderr.splitlines() if line.strip() and not LOG_LINE.match(line)]
    assert strays == [], "every line on stderr comes through our logging"


@pytest.mark.slow
def test_with_vv_the_jvm_chatter_comes_through_our_logging(tmp_path: Path) -> None:
    stderr = run_spark_clean(tmp_path, "-vv")
    assert "DEBUG cleaner.spark.jvm: WARNING: Using incubator modules" in stderr
    assert "DEBUG cleaner.spark.jvm: WARN NativeCodeLoader: Unable to load native-hadoop" in stderr
    assert "Using Spark's default log4j profile" not in stderr, "our log4j configuration was used"
    assert "DEBUG py4j" not in stderr, "py4j's per-message lines stay off even with -vv"

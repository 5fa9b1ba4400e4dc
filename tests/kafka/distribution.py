"""One Apache Kafka release's jars, fetched with Maven into a cache dir outside the repository on first use,
and the main classes of the broker and of the tools the tests run, which moved between 3.x and 4.x."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_KAFKA_VERSION", "KafkaDistribution", "kafka_version", "load_distribution"]

DEFAULT_KAFKA_VERSION = "4.4.0"
"""The newest Kafka release Maven Central serves that these tests were written against."""

VERSION_VARIABLE = "LOGCLEANER_KAFKA_VERSION"
POM = Path(__file__).with_name("pom.xml")

STORAGE_TOOL_CLASSES = ("kafka.tools.StorageTool", "org.apache.kafka.tools.StorageTool")
DUMP_LOG_SEGMENTS_CLASSES = ("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments")


@dataclass(frozen=True, slots=True)
class KafkaDistribution:
    """A Kafka release on this machine: its jars and the main classes the tests launch."""

    version: str
    jars_dir: Path
    storage_tool_class: str
    dump_log_segments_class: str

    @property
    def major(self) -> int:
        return int(self.version.split(".", 1)[0])

    @property
    def classpath(self) -> str:
        return f"{self.jars_dir}/*"

    @property
    def uses_log4j2(self) -> bool:
        """Kafka 4.0 moved from log4j 1 (reload4j) to log4j2 (KIP-653)."""
        return self.major >= 4


def kafka_version() -> str:
    """The release under test: ``LOGCLEANER_KAFKA_VERSION``, else the default."""
    version = os.environ.get(VERSION_VARIABLE, DEFAULT_KAFKA_VERSION).strip()
    parts = version.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts) or int(parts[0]) < 3:
        raise ValueError(f"{VERSION_VARIABLE}={version!r}: expected a Kafka release such as 3.9.2 or 4.4.0")
    return version


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "logcleaner-kafka"


def load_distribution(version: str | None = None) -> KafkaDistribution:
    """The release's jars, fetched under a lock (other test runs may fetch the same release at once) into a
    temporary dir that is renamed into place only once complete."""
    version = version or kafka_version()
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    jars_dir = root / version
    with open(root / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not jars_dir.is_dir():
            fetch_jars(version, jars_dir)
    return KafkaDistribution(
        version=version,
        jars_dir=jars_dir,
        storage_tool_class=find_main_class(jars_dir, STORAGE_TOOL_CLASSES),
        dump_log_segments_class=find_main_class(jars_dir, DUMP_LOG_SEGMENTS_CLASSES),
    )


def fetch_jars(version: str, jars_dir: Path) -> None:
    partial = jars_dir.with_name(f".{jars_dir.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    command = [
        "mvn",
        "-q",
        "-B",
        "-f",
        str(POM),
        f"-Dkafka.version={version}",
        f"-Dkafka.log4j2={'true' if int(version.split('.')[0]) >= 4 else 'false'}",
        "dependency:copy-dependencies",
        f"-DoutputDirectory={partial}",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=900)
    except FileNotFoundError as exc:
        raise RuntimeError("the kafka tests need Maven (mvn) on PATH to fetch Kafka's jars") from exc
    if done.returncode != 0:
        raise RuntimeError(
            f"Maven could not fetch Kafka {version} ({' '.join(command)}):\n{done.stdout}{done.stderr}"
        )
    os.rename(partial, jars_dir)


def find_main_class(jars_dir: Path, candidates: tuple[str, ...]) -> str:
    """The first of ``candidates`` that one of the jars holds."""
    entries: set[str] = set()
    for jar in sorted(jars_dir.glob("kafka*.jar")):
        with zipfile.ZipFile(jar) as opened:
            entries.update(opened.namelist())
    for name in candidates:
        if name.replace(".", "/") + ".class" in entries:
            return name
    raise RuntimeError(f"none of {', '.join(candidates)} is in the jars under {jars_dir}")

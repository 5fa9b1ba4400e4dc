"""Kafka's ``DumpLogSegments`` (``kafka-dump-log.sh``) over many files in one JVM, its text parsed into
per-file batches, records and index entries, and every problem it reports collected."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.kafka.broker import run_java_tool, write_log_config
from tests.kafka.distribution import KafkaDistribution

__all__ = ["DumpedFile", "KafkaDump", "dump_log_segments"]

FIELD = re.compile(r"(\w+): (\S+)")
PROBLEM_LINES = re.compile(
    r"Mismatches in|Found timestamp mismatch|Found out of order timestamp|indexed offsets are not found"
    r"|Found \d+ invalid bytes|Ignoring unknown file|isvalid: false|Exception|[Cc]orrupt"
)


@dataclass
class DumpedFile:
    """What the tool printed for one file: the ``key: value`` fields of each line, by kind of line."""

    path: Path
    batches: list[dict[str, str]] = field(default_factory=list)
    records: list[dict[str, str]] = field(default_factory=list)
    record_lines: list[str] = field(default_factory=list)
    """Each record's line as printed, for what the fields leave out (a decoder's JSON)."""
    entries: list[dict[str, str]] = field(default_factory=list)
    passed_sanity_check: bool = False


@dataclass
class KafkaDump:
    files: dict[Path, DumpedFile]
    problems: list[str]
    """Lines reporting a problem; a gap in offsets is not one (a compacted log has them)."""


def dump_log_segments(
    distribution: KafkaDistribution, files: Sequence[Path], *options: str, work_dir: Path
) -> KafkaDump:
    """Run the tool once over ``files`` with ``options`` (``--deep-iteration``, ``--index-sanity-check``,
    ``--verify-index-only``...). A failed sanity check ends the tool with an exception: a BrokerError."""
    log_config = write_log_config(distribution, work_dir, work_dir / "tools.log")
    done = run_java_tool(
        distribution,
        distribution.dump_log_segments_class,
        *options,
        "--files",
        ",".join(str(f) for f in files),
        log_config=log_config,
    )
    return KafkaDump(files=_parse_stdout(done.stdout), problems=_problems(done.stdout, done.stderr))


def _parse_stdout(text: str) -> dict[Path, DumpedFile]:
    files: dict[Path, DumpedFile] = {}
    current: DumpedFile | None = None
    for line in text.splitlines():
        if line.startswith("Dumping "):
            path = Path(line.removeprefix("Dumping "))
            current = files.setdefault(path, DumpedFile(path))
            continue
        if current is None or not line.strip():
            continue
        fields = dict(FIELD.findall(line))
        if line.endswith("passed sanity check."):
            current.passed_sanity_check = True
        elif line.startswith("baseOffset:"):
            current.batches.append(fields)
        elif line.startswith("| offset:"):
            current.records.append(fields)
            current.record_lines.append(line)
        elif line.startswith(("offset:", "timestamp:", "version:", "producerId:")):
            current.entries.append(fields)
    return files


def _problems(stdout: str, stderr: str) -> list[str]:
    """Every line reporting a problem. ``Non-consecutive offsets`` is none: a compacted log has gaps, and
    Kafka 4.x reports the first record of every segment not based at 0 as following offset -1; the tests
    compare each record's offset instead."""
    return [line for line in (stdout + "\n" + stderr).splitlines() if PROBLEM_LINES.search(line)]

"""What the tests of ``gen``'s coordinator workloads share: the CLI run in-process, a workload generated
with small segments over one minute, a dir's records per partition, and what a consumer of a compacted
topic ends with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.base.clock import SystemClock
from service.shell.cli import main
from service.storage.log_config import LogConfig
from service.storage.log_dir import load_log_dir
from service.storage.records import Record

START_MS = 1_700_000_000_000
SPREAD_MS = 60_000


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def generate(
    capsys: pytest.CaptureFixture[str], log_dir: Path, workload: str, *args: str
) -> list[dict[str, int]]:
    """``gen --workload workload *args`` into ``log_dir``, 1500-byte segments, stamped over a minute from
    ``START_MS``: each partition's JSON summary."""
    code, out, err = run(
        capsys,
        *("gen", "--log-dir", str(log_dir), "--workload", workload, *args),
        *(
            "--segment-bytes",
            "1500",
            "--timestamp-start",
            str(START_MS),
            "--timestamp-spread",
            str(SPREAD_MS),
        ),
        "--json",
    )
    assert code == 0, err
    topics: list[dict[str, int]] = json.loads(out)["topics"]
    return topics


def records_per_partition(log_dir: Path) -> dict[int, list[Record]]:
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(), clock=SystemClock())
    try:
        return {tp.partition: log.read(0, max_records=100_000) for tp, log in loaded.logs.items()}
    finally:
        for log in loaded.logs.values():
            log.close()


def latest_per_key(records: list[Record]) -> dict[bytes, bytes]:
    """What a consumer of the compacted topic ends with: the newest value per key, tombstones deleting."""
    latest: dict[bytes, bytes | None] = {}
    for record in records:
        latest[record.key or b""] = record.value
    return {key: value for key, value in latest.items() if value is not None}

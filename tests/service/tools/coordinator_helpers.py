"""What the tests of ``gen``'s coordinator workloads share: the CLI run in-process, a dir's records per
partition, and what a consumer of a compacted topic ends with."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.cli import main
from service.clock import SystemClock
from service.storage.log_config import LogConfig
from service.storage.log_dir import load_log_dir
from service.storage.records import Record


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


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

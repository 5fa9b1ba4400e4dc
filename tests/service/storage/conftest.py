"""Factories for logs on real files, with a manual clock (the only fake)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from service.base.clock import ManualClock
from service.storage.loader import LoadResult, load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record

MakeLog = Callable[..., PartitionLog]
OpenLog = Callable[..., LoadResult]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "topic-0"
    directory.mkdir()
    return directory


@pytest.fixture
def open_log(log_dir: Path, clock: ManualClock) -> OpenLog:
    """Load (or reload) the log in ``log_dir`` with the given config fields."""

    def _open(
        *, clean_shutdown: bool = False, recovery_point: int = 0, log_start_offset: int = 0, **config: Any
    ) -> LoadResult:
        return load_partition_log(
            log_dir,
            LogConfig(**config),
            clock=clock,
            clean_shutdown=clean_shutdown,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
        )

    return _open


@pytest.fixture
def make_log(open_log: OpenLog) -> MakeLog:
    def _make(**config: Any) -> PartitionLog:
        return open_log(**config).log

    return _make


def plain(value: bytes = b"test", timestamp: int = -1) -> Record:
    """Kafka tests' ``plain(v)``: null key; with a 4-byte value the batch is 72 bytes."""
    return Record(0, timestamp, None, value)


def keyed(key: bytes, value: bytes | None, timestamp: int = -1) -> Record:
    return Record(0, timestamp, key, value)

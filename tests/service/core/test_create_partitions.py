"""Kafka's CreatePartitions through the LogManager: grow only, new dirs on disk, loadable after restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.base.errors import InvalidInputError, NotFoundError
from service.core.log_manager import LogManager
from service.core.tasks import ManualTaskScheduler
from service.storage.log_config import LogConfig


def manager(tmp_path: Path, clock: ManualClock) -> LogManager:
    return LogManager([tmp_path], lambda _t: LogConfig(), clock=clock, scheduler=ManualTaskScheduler(clock))


def test_partitions_grow_and_survive_a_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    first = manager(tmp_path, clock)
    first.startup()
    first.create_topic("orders", 2)
    created = first.create_partitions("orders", 5)
    assert [log.topic_partition.partition for log in created] == [2, 3, 4]
    assert first.topics() == {"orders": [0, 1, 2, 3, 4]}
    with pytest.raises(InvalidInputError, match="must be larger"):
        first.create_partitions("orders", 5)
    with pytest.raises(NotFoundError):
        first.create_partitions("absent", 3)
    first.shutdown()
    second = manager(tmp_path, clock)
    second.startup()
    assert second.topics() == {"orders": [0, 1, 2, 3, 4]}
    assert all((tmp_path / f"orders-{p}" / "00000000000000000000.log").exists() for p in range(5))
    second.shutdown()

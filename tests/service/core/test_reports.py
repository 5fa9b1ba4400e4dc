"""``reports``: the JSON documents the CLI's ``--json`` and the REST API share. ``explain_partitions``
picks the live logs a topic (and partition) names, in topic-partition order (partition 10 after 2), and
refuses a name that matches nothing; ``retention_document`` and ``topic_config_document`` have the
contract's keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.base.errors import NotFoundError
from service.config.topic_config import ConfigEntry
from service.core.log_manager import DeletedSegment, LogManager
from service.core.reports import (
    explain_document,
    explain_partitions,
    retention_document,
    topic_config_document,
)
from service.core.retention import RetentionReason
from service.core.tasks import ManualTaskScheduler
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log_config import LogConfig
from service.storage.log_files import CLEANER_OFFSET_CHECKPOINT
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.retention_helpers import START_MS


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[LogManager]:
    """``orders`` with 12 partitions and ``audit`` with 1, compacted; orders-2 holds a few segments."""
    clock = ManualClock(START_MS)
    config = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=350)
    manager = LogManager(
        [tmp_path / "logs"], lambda _t: config, clock=clock, scheduler=ManualTaskScheduler(clock)
    )
    manager.startup()
    manager.create_topic("orders", 12)
    manager.create_topic("audit", 1)
    log = manager.get_log(TopicPartition("orders", 2))
    assert log is not None
    for i in range(12):
        log.append_records([Record(0, START_MS, b"%d" % (i % 3), b"v")])
    yield manager
    manager.release_locks()


def names(docs: list[dict[str, object]]) -> list[str]:
    return [f"{d['topic']}-{d['partition']}" for d in docs]


def test_every_partition_in_topic_partition_order(manager: LogManager) -> None:
    docs = explain_partitions(manager, cleaner_enabled=True)
    assert names(docs) == ["audit-0", *(f"orders-{i}" for i in range(12))]


def test_a_topic_and_a_partition_narrow_it(manager: LogManager) -> None:
    assert names(explain_partitions(manager, cleaner_enabled=True, topic="audit")) == ["audit-0"]
    assert names(explain_partitions(manager, cleaner_enabled=True, topic="orders", partition=10)) == [
        "orders-10"
    ]


@pytest.mark.parametrize(
    ("topic", "partition", "message"),
    [
        ("nope", None, "no partition matches topic 'nope'"),
        ("orders", 12, "no partition matches topic 'orders' partition 12"),
    ],
)
def test_a_name_that_matches_nothing_is_not_found(
    manager: LogManager, topic: str, partition: int | None, message: str
) -> None:
    with pytest.raises(NotFoundError, match=message):
        explain_partitions(manager, cleaner_enabled=True, topic=topic, partition=partition)


def test_each_log_is_explained_from_its_own_dirs_cleaner_checkpoint(manager: LogManager) -> None:
    orders_2 = TopicPartition("orders", 2)
    OffsetCheckpointFile(manager.log_dirs[0] / CLEANER_OFFSET_CHECKPOINT).write({orders_2: 5})
    document = explain_document(manager, cleaner_enabled=True, topic="orders", partition=2)
    docs = document["partitions"]
    assert isinstance(docs, list) and len(docs) == 1
    cleaner = docs[0]["cleaner"]
    assert cleaner["first_dirty_offset"] == 5 and cleaner["first_uncleanable_offset"] == 10


def test_the_retention_document() -> None:
    deleted = [DeletedSegment("orders", 2, 100, 2048, RetentionReason.TIME)]
    assert retention_document(deleted, dry_run=True) == {
        "dry_run": True,
        "deleted": [
            {
                "topic": "orders",
                "partition": 2,
                "base_offset": 100,
                "size_bytes": 2048,
                "reason": str(RetentionReason.TIME),
            }
        ],
    }
    assert retention_document([], dry_run=False) == {"dry_run": False, "deleted": []}


def test_the_topic_config_document_keeps_the_entries_order() -> None:
    entries = {
        "cleanup.policy": ConfigEntry("cleanup.policy", "compact", "override"),
        "retention.ms": ConfigEntry("retention.ms", 604_800_000, "default"),
    }
    assert topic_config_document("orders", entries) == {
        "topic": "orders",
        "configs": [
            {"name": "cleanup.policy", "value": "compact", "source": "override"},
            {"name": "retention.ms", "value": 604_800_000, "source": "default"},
        ],
    }

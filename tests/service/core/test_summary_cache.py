"""``BrokerSummary``: the daemon's ready-made summary document. Nothing before the first refresh for a
scrape, one built on demand for a request; each refresh sketches up to its byte budget (the candidates'
oldest segments first) and writes the sketches to each log dir's sketch file, whose write failing is
logged and does not fail the refresh; uncleanable partitions are no candidates."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.core.log_manager import LogManager
from service.core.sketch_file import SKETCH_FILE, read_sketch_file
from service.core.summary_cache import BrokerSummary
from service.core.tasks import ManualTaskScheduler
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.retention_helpers import START_MS

SEGMENT_BYTES = 350  # five 70-byte keyed batches a segment
COMPACTED = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=SEGMENT_BYTES)
T0 = TopicPartition("orders", 0)


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[LogManager]:
    """A started manager over one log dir with ``orders`` (compacted, 2 partitions): in each, five
    segments of one-record batches over three keys, the last one active."""
    clock = ManualClock(START_MS)
    manager = LogManager(
        [tmp_path / "logs"], lambda _topic: COMPACTED, clock=clock, scheduler=ManualTaskScheduler(clock)
    )
    manager.startup()
    for log in manager.create_topic("orders", 2):
        fill(log)
    yield manager
    manager.release_locks()


def fill(log: PartitionLog) -> None:
    for i in range(25):
        log.append_records([Record(0, START_MS, b"%d" % (i % 3), b"%d" % (i % 10))])
    assert len(log.segments) == 5


def reclaimable(document: dict[str, object]) -> dict[str, object]:
    figures = document["reclaimable"]
    assert isinstance(figures, dict)
    return figures


def test_a_scrape_waits_for_the_first_refresh_and_a_request_does_not(manager: LogManager) -> None:
    summary = BrokerSummary(manager, cleaner_enabled=True, uncleanable=frozenset)
    assert summary.latest() is None
    document = summary.document()
    assert document["partitions"] == 2
    assert summary.latest() is document, "the one built on demand is kept"
    assert reclaimable(document)["compaction_unestimated_bytes"] == 2 * 4 * SEGMENT_BYTES, "no record read"
    assert not (manager.log_dirs[0] / SKETCH_FILE).exists()


def test_a_refresh_sketches_within_its_budget_and_saves_the_sketches(manager: LogManager) -> None:
    summary = BrokerSummary(
        manager, cleaner_enabled=True, uncleanable=frozenset, sketch_bytes_per_refresh=5 * SEGMENT_BYTES
    )
    first = reclaimable(summary.refresh())
    saved = read_sketch_file(manager.log_dirs[0])
    assert len(saved) == 5, "the budget: four segments of one partition, one of the next"
    assert first["compaction"] == 4 * SEGMENT_BYTES - 3 * 70, (
        "one partition estimated: exact at a record a batch"
    )
    assert first["compaction_unestimated_bytes"] == 4 * SEGMENT_BYTES
    second = reclaimable(summary.refresh())
    assert len(read_sketch_file(manager.log_dirs[0])) == 8
    assert second["compaction"] == 2 * (4 * SEGMENT_BYTES - 3 * 70)
    assert second["compaction_unestimated_bytes"] == 0 and second["compaction_estimated"] is True


def test_the_document_follows_the_logs_at_the_next_refresh_only(manager: LogManager) -> None:
    summary = BrokerSummary(manager, cleaner_enabled=True, uncleanable=frozenset)
    before = summary.refresh()
    log = manager.get_log(T0)
    assert log is not None
    log.append_records([Record(0, START_MS, b"new", b"v")])
    assert summary.document() is before
    after = summary.refresh()
    on_disk = sum(s.size_bytes for log in manager.logs.values() for s in log.segments)
    assert after["total_bytes"] == on_disk != before["total_bytes"]


def test_uncleanable_partitions_are_not_candidates(manager: LogManager) -> None:
    summary = BrokerSummary(manager, cleaner_enabled=True, uncleanable=lambda: {T0})
    figures = reclaimable(summary.refresh())
    assert figures["compaction"] == 4 * SEGMENT_BYTES - 3 * 70, "partition 1 only"
    assert len(read_sketch_file(manager.log_dirs[0])) == 4


def test_without_a_cleaner_nothing_is_sketched(manager: LogManager) -> None:
    summary = BrokerSummary(manager, cleaner_enabled=False, uncleanable=frozenset)
    assert reclaimable(summary.refresh())["compaction"] == 0
    assert not (manager.log_dirs[0] / SKETCH_FILE).exists()


def test_a_sketch_file_that_cannot_be_written_is_logged_not_raised(
    manager: LogManager, caplog: pytest.LogCaptureFixture
) -> None:
    (manager.log_dirs[0] / SKETCH_FILE).mkdir()  # the rename over it fails
    summary = BrokerSummary(manager, cleaner_enabled=True, uncleanable=frozenset)
    with caplog.at_level(logging.WARNING, logger="service.core.summary_cache"):
        figures = reclaimable(summary.refresh())
    assert figures["compaction_unestimated_bytes"] == 0
    assert any("Cannot write the key sketches" in r.getMessage() for r in caplog.records)

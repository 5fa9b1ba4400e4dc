"""``PartitionFigures`` (the ``PartitionScrapes`` port) over a real ``LogManager`` and real log dirs: a row
per live log (size, segments, log start and end offsets, segments held back by a future timestamp), compaction
delays for compacted partitions only and only with a cleaner, and the partitions of a log dir gone offline
kept with their last figures. (The series ``/metrics`` makes of them are in ``tests/api/metrics/``.)"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.core.log_manager import LogManager
from service.core.partition_figures import PartitionFigures
from service.core.ports import PartitionScrape
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.core.managers import MakeManager, manager_factory
from tests.service.retention_helpers import START_MS

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS


def config_for(topic: str) -> LogConfig:
    """One ~73-byte batch per segment; ``profiles`` compacted (any dirt makes it due), the rest deleted after
    an hour."""
    if topic == "profiles":
        return LogConfig(
            segment_bytes=100, cleanup_policy=frozenset({"compact"}), min_cleanable_dirty_ratio=0.1
        )
    return LogConfig(segment_bytes=100, retention_ms=HOUR_MS)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def make_manager(clock: ManualClock) -> Iterator[MakeManager]:
    with manager_factory(clock, config_for) as make:
        yield make


def append(log: PartitionLog, *timestamps: int) -> None:
    """One batch of one keyed record per timestamp: a segment each."""
    for n, timestamp in enumerate(timestamps):
        log.append_records([Record(0, timestamp, b"key", b"value-%d" % n)])


def row(log: PartitionLog, held: int = 0) -> tuple[TopicPartition, int, int, int, int, int]:
    segments = log.segments
    size = sum(s.size_bytes for s in segments)
    return (log.topic_partition, size, len(segments), log.log_start_offset, log.log_end_offset, held)


def take_offline(manager: LogManager, log_dir: Path) -> None:
    """As a failed disk does: the dir's next checkpoint fails with an I/O error."""
    shutil.move(log_dir, log_dir.with_name(log_dir.name + "-gone"))
    log_dir.write_text("not a directory")
    manager.checkpoint_recovery_points()
    assert list(manager.offline_dirs) == [log_dir.resolve()]


def events_and_profiles(manager: LogManager) -> tuple[PartitionLog, PartitionLog]:
    """One partition each of ``events`` (deleted by time) and ``profiles`` (compacted: see ``config_for``)."""
    [events] = manager.create_topic("events", 1)
    [profiles] = manager.create_topic("profiles", 1)
    return events, profiles


def test_a_row_per_live_log_and_delays_for_the_compacted_ones(
    tmp_path: Path, clock: ManualClock, make_manager: MakeManager
) -> None:
    manager = make_manager(tmp_path / "logs")
    events, profiles = events_and_profiles(manager)
    now = clock.now_ms()
    append(events, now - DAY_MS, now + DAY_MS, now)  # the middle segment stamped a day ahead
    append(profiles, now, now, now, now)
    figures = PartitionFigures(manager)

    scrape = figures.scrape()

    assert sorted(scrape.rows) == sorted([row(events, held=1), row(profiles)])
    assert row(events)[2:5] == (3, 0, 3)  # three one-batch segments, offsets 0-2
    assert scrape.delays == {profiles.topic_partition: 0}  # cleanable, first found so now
    assert scrape.offline == []
    clock.advance(MINUTE_MS)
    assert figures.scrape().delays == {profiles.topic_partition: MINUTE_MS}
    clock.advance(DAY_MS)  # the stamp a day ahead is in the past now
    assert dict((r[0], r[5]) for r in figures.scrape().rows)[events.topic_partition] == 0


def test_without_a_cleaner_there_are_no_delays(
    tmp_path: Path, clock: ManualClock, make_manager: MakeManager
) -> None:
    manager = make_manager(tmp_path / "logs", cleaner_enabled=False)
    [profiles] = manager.create_topic("profiles", 1)
    append(profiles, clock.now_ms(), clock.now_ms(), clock.now_ms())

    scrape = PartitionFigures(manager).scrape()

    assert scrape.rows == [row(profiles)]
    assert scrape.delays == {}


def test_an_offline_dirs_partitions_keep_their_last_figures_after_the_live_ones(
    tmp_path: Path, clock: ManualClock, make_manager: MakeManager
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    manager = make_manager(a, b)
    logs = {log.directory.parent: log for log in manager.create_topic("profiles", 2)}
    on_a, on_b = logs[a.resolve()], logs[b.resolve()]
    now = clock.now_ms()
    append(on_a, now, now, now)
    append(on_b, now, now, now, now + DAY_MS, now)
    figures = PartitionFigures(manager)
    before = figures.scrape()
    last_of_b = row(on_b, held=0)  # compacted only: no retention, nothing held back

    clock.advance(MINUTE_MS)
    take_offline(manager, b)
    after = figures.scrape()

    assert sorted(before.rows) == sorted([row(on_a), last_of_b])
    assert after.rows == [row(on_a), last_of_b]  # the live logs first, then the offline ones
    assert after.offline == [on_b.topic_partition]
    assert after.delays == {on_a.topic_partition: MINUTE_MS, on_b.topic_partition: MINUTE_MS}
    clock.advance(MINUTE_MS)
    assert figures.scrape().delays[on_b.topic_partition] == 2 * MINUTE_MS  # not cleaned: it keeps growing


def test_a_deleted_topic_leaves_the_scrape(
    tmp_path: Path, clock: ManualClock, make_manager: MakeManager
) -> None:
    manager = make_manager(tmp_path / "logs")
    events, profiles = events_and_profiles(manager)
    now = clock.now_ms()
    append(events, now + DAY_MS, now)
    append(profiles, now, now, now)
    figures = PartitionFigures(manager)
    assert len(figures.scrape().rows) == 2

    manager.delete_topic("events")
    manager.delete_topic("profiles")

    assert figures.scrape() == PartitionScrape([], {}, [])

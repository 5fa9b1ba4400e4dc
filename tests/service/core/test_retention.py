"""Retention (Kafka ``UnifiedLog.deleteOldSegments``) on real logs, much as ``UnifiedLogTest`` and
``LogManagerTest`` check it.

Each test builds a log on disk, moves a manual clock and runs ``LogManager.delete_old_segments``, which
plans with ``plan_retention`` and deletes with ``PartitionLog.delete_oldest_segments``. The high watermark
always equals the log end offset here (one replica), so the tests that hold it lower (as Kafka's
``UnifiedLogTest.testDeleteOldSegments`` does) run the plan with a smaller ``high_watermark`` and apply it
with ``delete_oldest_segments``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from service.base.clock import ManualClock
from service.core.log_manager import LogManager, LogManagerSettings
from service.core.retention import RetentionReason, explain_log_retention, plan_retention
from service.core.tasks import ManualTaskScheduler
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.records import Record
from tests.service.retention_helpers import (
    START_MS,
    append_keyed,
    append_plain,
    bases,
    log_config,
    new_partition_log,
    ranges,
    retention_runner,
    set_mtimes,
)

NewLog = Callable[..., PartitionLog]

TIME = RetentionReason.TIME
SIZE = RetentionReason.SIZE
START = RetentionReason.LOG_START_OFFSET


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def scheduler(clock: ManualClock) -> ManualTaskScheduler:
    return ManualTaskScheduler(clock)


@pytest.fixture
def retention(clock: ManualClock, scheduler: ManualTaskScheduler) -> LogManager:
    return retention_runner(clock, scheduler)


@pytest.fixture
def new_log(tmp_path: Path, clock: ManualClock) -> NewLog:
    def _new(policy: str = "delete", **config: Any) -> PartitionLog:
        return new_partition_log(tmp_path / "topic-0", clock, policy=policy, **config)

    return _new


def run(retention: LogManager, log: PartitionLog) -> list[tuple[int, RetentionReason]]:
    """One retention pass: (base offset, reason) of each deleted segment."""
    return [(d.base_offset, d.reason) for d in retention.delete_old_segments(log)]


def plan_at_high_watermark(log: PartitionLog, now_ms: int, high_watermark: int) -> int:
    """How many segments retention would delete if the high watermark were ``high_watermark``."""
    plan = plan_retention(
        log.segments,
        log.config,
        now_ms=now_ms,
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        high_watermark=high_watermark,
    )
    return plan.total


def files(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


# -- size -------------------------------------------------------------------------------------------


def test_size_retention_deletes_exactly_the_excess(new_log: NewLog, retention: LogManager) -> None:
    """1080 bytes against retention.bytes=720: the oldest 360-byte segment goes."""
    log = new_log(segment_bytes=360, retention_bytes=720)
    append_plain(log, 15)
    set_mtimes(log, START_MS)
    assert ranges(log) == [(0, 4), (5, 9), (10, 14)]
    assert [s.size_bytes for s in log.segments] == [360, 360, 360]

    deleted = retention.delete_old_segments(log)

    assert [(d.topic, d.partition, d.base_offset, d.size_bytes, d.reason) for d in deleted] == [
        ("topic", 0, 0, 360, SIZE)
    ]
    assert ranges(log) == [(5, 9), (10, 14)]
    assert log.log_start_offset == 5
    assert log.log_end_offset == 15


@pytest.mark.parametrize("retention_bytes", [1080, 1079, 721])
def test_size_retention_never_drops_below_the_limit(
    new_log: NewLog, retention: LogManager, retention_bytes: int
) -> None:
    """At the limit nothing goes; an excess smaller than the oldest segment deletes nothing either."""
    log = new_log(segment_bytes=360, retention_bytes=retention_bytes)
    append_plain(log, 15)
    set_mtimes(log, START_MS)
    assert run(retention, log) == []
    assert len(log.segments) == 3
    assert log.log_start_offset == 0


# -- time -------------------------------------------------------------------------------------------


def test_time_retention_deletes_everything_and_rolls_first(new_log: NewLog, retention: LogManager) -> None:
    """Every segment, the non-empty active one included, expired: roll at 15, then delete all three."""
    log = new_log(segment_bytes=360, retention_ms=10_000)
    append_plain(log, 15, timestamp=10)

    assert run(retention, log) == [(0, TIME), (5, TIME), (10, TIME)]

    assert len(log.segments) == 1
    assert log.segments[0].base_offset == 15
    assert log.segments[0].size_bytes == 0
    assert log.log_start_offset == log.log_end_offset == 15


def test_time_retention_keeps_young_segments(new_log: NewLog, retention: LogManager) -> None:
    """Records stamped now, retention.ms=10,000,000: nothing goes."""
    log = new_log(segment_bytes=360, retention_ms=10_000_000)
    append_plain(log, 15, timestamp=START_MS)
    assert run(retention, log) == []
    assert len(log.segments) == 3


# -- policies -------------------------------------------------------------------------------------


def test_compact_only_logs_get_no_time_or_size_retention(new_log: NewLog, retention: LogManager) -> None:
    """cleanup.policy=compact, records long expired and the first segment's mtime old: 3 segments stay."""
    log = new_log("compact", segment_bytes=380, retention_ms=10_000, retention_bytes=0)
    append_keyed(log, 15, timestamp=10)
    log.segments[0].set_last_modified_ms(START_MS - 20_000)
    assert [s.size_bytes for s in log.segments] == [380, 380, 380]

    assert run(retention, log) == []
    assert len(log.segments) == 3


def test_compact_delete_logs_get_time_retention(new_log: NewLog, retention: LogManager) -> None:
    """cleanup.policy=compact,delete: the expired segments go, one (new, empty) segment is left."""
    log = new_log("compact,delete", segment_bytes=380, retention_ms=10_000)
    append_keyed(log, 15, timestamp=10)
    assert run(retention, log) == [(0, TIME), (5, TIME), (10, TIME)]
    assert len(log.segments) == 1
    assert log.log_start_offset == 15


def test_compact_only_logs_still_get_start_offset_retention(new_log: NewLog, retention: LogManager) -> None:
    """Compact only, 3 segments, DeleteRecords to 5: the first segment goes by the start-offset step."""
    log = new_log("compact", segment_bytes=380)
    append_keyed(log, 15, timestamp=START_MS)
    assert log.increment_log_start_offset(5)

    assert run(retention, log) == [(0, START)]

    assert len(log.segments) == 2
    first, *rest = bases(log)
    assert first <= log.log_start_offset == 5
    assert all(base > 5 for base in rest)


def test_start_offset_step_runs_before_size_and_time(new_log: NewLog, retention: LogManager) -> None:
    """Start offset first, then size and time on what is left; every deletion is labelled."""
    log = new_log(segment_bytes=360, retention_bytes=720, retention_ms=10_000)
    append_plain(log, 25, timestamp=START_MS)  # five segments, 1800 bytes, none expired
    log.increment_log_start_offset(5)

    # After the start-offset step 1440 bytes remain: 720 too many, i.e. two more segments by size.
    assert run(retention, log) == [(0, START), (5, SIZE), (10, SIZE)]
    assert bases(log) == [15, 20]
    assert log.log_start_offset == 15


# -- DeleteRecords, then retention ------------------------------------------------------------------


def test_retention_after_delete_records(new_log: NewLog, retention: LogManager) -> None:
    log = new_log(segment_bytes=360)
    append_plain(log, 15)
    set_mtimes(log, START_MS)

    log.increment_log_start_offset(1)
    assert run(retention, log) == []
    assert (len(log.segments), log.log_start_offset) == (3, 1)

    log.increment_log_start_offset(6)
    assert run(retention, log) == [(0, START)]
    assert (len(log.segments), log.log_start_offset) == (2, 6)

    log.increment_log_start_offset(15)
    assert run(retention, log) == [(5, START)]
    assert bases(log) == [10], "the start-offset step never removes the active segment"
    assert log.log_start_offset == 15
    assert log.log_end_offset == 15


# -- the high watermark gate (a lower high watermark, set by hand) -----------------------------------


def _hundred_expired_records(new_log: NewLog) -> PartitionLog:
    log = new_log(segment_bytes=512, retention_ms=999)
    for i in range(100):
        log.append_records([Record(0, START_MS - 1000, None, b"test%d" % i)])
    assert len(log.segments) >= 6
    return log


def test_nothing_at_or_above_the_high_watermark_is_deleted(new_log: NewLog, clock: ManualClock) -> None:
    """As the high watermark walks 0..100, only segments wholly below it go."""
    log = _hundred_expired_records(new_log)
    assert plan_at_high_watermark(log, clock.now_ms(), 0) == 0, "HW 0: nothing is deleted"

    for hw in range(101):
        log.delete_oldest_segments(plan_at_high_watermark(log, clock.now_ms(), hw))
        first, *rest = bases(log)
        assert log.log_start_offset <= hw
        assert log.log_start_offset <= first <= hw
        assert all(base > hw for base in rest)

    assert log.log_start_offset == 100
    assert len(log.segments) == 1
    assert log.active_segment.size_bytes == 0


def test_high_watermark_initialised_mid_log(new_log: NewLog, clock: ManualClock) -> None:
    log = _hundred_expired_records(new_log)
    before = len(log.segments)
    log.delete_oldest_segments(plan_at_high_watermark(log, clock.now_ms(), 25))
    assert len(log.segments) < before
    assert log.log_start_offset <= 25
    assert bases(log)[1] > 25


# -- idempotency ------------------------------------------------------------------------------------


def test_retention_is_idempotent(
    new_log: NewLog, retention: LogManager, scheduler: ManualTaskScheduler
) -> None:
    log = new_log(segment_bytes=10_240, retention_bytes=-1, retention_ms=900, file_delete_delay_ms=0)
    log.append_records([Record(0, START_MS + 100, None, b"a")])
    log.roll()
    log.append_records([Record(0, START_MS, None, b"b")])
    log.roll()
    log.append_records([Record(0, START_MS + 100, None, b"c")])
    scheduler.advance(901)
    log.increment_log_start_offset(1)

    assert run(retention, log) == [(0, START), (1, TIME)], "[c] is only 801 ms old"
    assert run(retention, log) == []
    assert bases(log) == [2]
    scheduler.tick()
    assert not [name for name in files(log.directory) if name.endswith(".deleted")]


# -- offsets are kept across deletion (roll-first) -------------------------------------------------


@pytest.mark.parametrize("count", [0, 1, 25])
def test_garbage_collecting_segments_keeps_the_log_end_offset(
    new_log: NewLog, retention: LogManager, count: int
) -> None:
    log = new_log(segment_bytes=100, retention_ms=0)
    append_plain(log, count, timestamp=START_MS - 10)
    assert len(log.segments) == max(count, 1)

    deleted = run(retention, log)

    assert len(deleted) == count, "an empty active segment is never deleted"
    assert log.log_end_offset == count
    assert len(log.segments) == 1
    assert run(retention, log) == []
    info = log.append_records([Record(0, START_MS, None, b"next")])
    assert info.first_offset == count


def test_roll_first_when_every_segment_is_deletable(new_log: NewLog, retention: LogManager) -> None:
    """A new empty active segment at the LEO comes first; the next append gets the old LEO."""
    log = new_log(segment_bytes=360, retention_ms=1000)
    append_plain(log, 12, timestamp=START_MS - 5000)
    plan = plan_retention(
        log.segments,
        log.config,
        now_ms=START_MS,
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        high_watermark=log.high_watermark,
    )
    assert (plan.total, plan.roll_first) == (3, True)

    assert len(run(retention, log)) == 3

    assert bases(log) == [12]
    assert log.log_start_offset == log.log_end_offset == log.high_watermark == 12
    assert log.read(12) == []
    assert log.append_records([Record(0, START_MS, None, b"x")]).first_offset == 12
    assert [r.offset for r in log.read(0)] == [12]


# -- asynchronous file deletion ---------------------------------------------------------------------


def test_deleted_segments_are_renamed_at_once_and_removed_after_the_delay(
    new_log: NewLog, retention: LogManager, scheduler: ManualTaskScheduler
) -> None:
    log = new_log(segment_bytes=360, index_interval_bytes=10_000, retention_ms=999, file_delete_delay_ms=1000)
    append_plain(log, 100, timestamp=START_MS - 1000)
    old = log.segments
    assert len(old) == 20

    assert len(run(retention, log)) == 20

    assert bases(log) == [100]
    for segment in old:
        for suffix in (".log", ".index"):
            original = log.directory / f"{segment.base_offset:020d}{suffix}"
            assert not original.exists()
            assert Path(f"{original}.deleted").exists()
    assert scheduler.pending == 1

    scheduler.advance(999)
    # .log, .index, .timeindex of 20 segments, and the producer snapshots named by 19 of them (5, 10, ...)
    assert len([name for name in files(log.directory) if name.endswith(".deleted")]) == 60 + 19
    scheduler.advance(1)
    assert [n for n in files(log.directory) if n[0].isdigit()] == [
        "00000000000000000100.log",
        "00000000000000000100.snapshot",
    ]
    assert scheduler.pending == 0


def test_dry_run_deletes_nothing(
    new_log: NewLog, retention: LogManager, scheduler: ManualTaskScheduler
) -> None:
    log = new_log(segment_bytes=360, retention_ms=999)
    append_plain(log, 10, timestamp=START_MS - 1000)
    before = files(log.directory)

    deleted = retention.delete_old_segments(log, dry_run=True)

    assert [(d.base_offset, d.reason) for d in deleted] == [(0, TIME), (5, TIME)]
    assert files(log.directory) == before
    assert (len(log.segments), log.log_start_offset, scheduler.pending) == (2, 0, 0)


def test_loading_deletes_obsolete_deleted_files(
    new_log: NewLog, retention: LogManager, clock: ManualClock
) -> None:
    log = new_log(segment_bytes=360, retention_ms=999)
    append_plain(log, 100, timestamp=START_MS - 1000)
    assert len(run(retention, log)) == 20
    assert any(name.endswith(".deleted") for name in files(log.directory))
    log.close()

    reopened = load_partition_log(log.directory, log.config, clock=clock, clean_shutdown=False).log

    assert len(reopened.segments) == 1
    assert not [name for name in files(log.directory) if name.endswith(".deleted")]
    assert (reopened.log_start_offset, reopened.log_end_offset) == (100, 100)


# -- the prefix rule ------------------------------------------------------------------------------


def _nine_single_record_segments(new_log: NewLog, **config: Any) -> PartitionLog:
    log = new_log(**config)
    for _ in range(9):
        append_plain(log, 1, timestamp=START_MS - 10_000)
        log.roll()
    assert len(log.segments) == 10
    assert log.active_segment.size_bytes == 0
    return log


def test_deletable_segments_are_a_prefix(new_log: NewLog, clock: ManualClock) -> None:
    log = _nine_single_record_segments(new_log, retention_ms=-1)

    def plan(*, log_start_offset: int, retention_ms: int) -> tuple[int, bool]:
        p = plan_retention(
            log.segments,
            log_config(retention_ms=retention_ms),
            now_ms=clock.now_ms(),
            log_start_offset=log_start_offset,
            log_end_offset=log.log_end_offset,
            high_watermark=log.high_watermark,
        )
        return p.total, p.roll_first

    # "base ≤ 5": the start-offset step at 6 takes the six oldest.
    assert plan(log_start_offset=6, retention_ms=-1) == (6, False)
    # "always": every segment but the empty active one.
    assert plan(log_start_offset=0, retention_ms=0) == (9, False)
    append_plain(log, 1, timestamp=START_MS - 10_000)
    assert plan(log_start_offset=0, retention_ms=0) == (10, True)


def test_a_young_segment_stops_time_retention(new_log: NewLog, retention: LogManager) -> None:
    log = new_log(retention_ms=1000)
    for timestamp in (START_MS - 5000, START_MS - 5000, START_MS, START_MS - 5000):
        append_plain(log, 1, timestamp=timestamp)
        log.roll()
    append_plain(log, 1, timestamp=START_MS - 5000)

    assert run(retention, log) == [(0, TIME), (1, TIME)]
    assert bases(log) == [2, 3, 4]


# -- LogManager-driven retention -------------------------------------------------------------------

ManagerFactory = Callable[..., LogManager]


@pytest.fixture
def log_manager(
    tmp_path: Path, clock: ManualClock, scheduler: ManualTaskScheduler
) -> Iterator[ManagerFactory]:
    """A started LogManager over one log dir whose topics all get the given settings."""
    managers: list[LogManager] = []

    def _make(*, cleaner_enabled: bool = True, policy: str = "delete", **config: Any) -> LogManager:
        manager = LogManager(
            [tmp_path / "logs"],
            lambda _topic: log_config(policy=policy, **config),
            clock=clock,
            scheduler=scheduler,
            settings=LogManagerSettings(cleaner_enabled=cleaner_enabled),
        )
        manager.startup()
        managers.append(manager)
        return manager

    yield _make
    for manager in managers:
        manager.release_locks()


def test_retention_task_expires_segments_by_mtime(
    log_manager: ManagerFactory, clock: ManualClock, scheduler: ManualTaskScheduler
) -> None:
    """Records without timestamps age from the .log mtime; the task deletes all 15 segments."""
    manager = log_manager(segment_bytes=1024, segment_index_bytes=4096, retention_ms=600_000)
    [log] = manager.create_topic("topic", 1)
    append_plain(log, 200)
    assert len(log.segments) == 15
    assert [s.size_bytes for s in log.segments] == [14 * 72] * 14 + [4 * 72]
    set_mtimes(log, clock.now_ms())
    assert all(s.largest_timestamp() == (START_MS, "mtime") for s in log.segments)

    scheduler.advance(600_000)
    assert manager.cleanup_logs() == [], "age == retention.ms is kept"
    scheduler.advance(1)
    deleted = manager.cleanup_logs()

    assert len(deleted) == 15
    assert {d.reason for d in deleted} == {TIME}
    assert len(log.segments) == 1
    assert log.log_end_offset == 200
    assert any(name.endswith(".deleted") for name in files(log.directory))
    scheduler.advance(log.config.file_delete_delay_ms)
    # A broker's files (its .index and .timeindex are created on first use here), and partition.metadata.
    assert files(log.directory) == [
        "00000000000000000200.log",
        "00000000000000000200.snapshot",
        "leader-epoch-checkpoint",
        "partition.metadata",
    ]
    assert log.read(200) == []
    assert log.read(0) == []
    assert log.append_records([Record(0, -1, None, b"test")]).first_offset == 200


def test_retention_task_keeps_the_log_within_retention_bytes(
    log_manager: ManagerFactory, clock: ManualClock, scheduler: ManualTaskScheduler
) -> None:
    """20 × 720 bytes against 3610: excess 10,790 ⇒ 14 segments go, 6 stay."""
    manager = log_manager(segment_bytes=720, retention_bytes=3610)
    [log] = manager.create_topic("topic", 1)
    append_plain(log, 200)
    set_mtimes(log, clock.now_ms())
    assert len(log.segments) == 20

    deleted = manager.cleanup_logs()

    assert [(d.base_offset, d.reason) for d in deleted] == [(10 * i, SIZE) for i in range(14)]
    assert bases(log) == [140, 150, 160, 170, 180, 190]
    assert log.log_start_offset == 140
    scheduler.advance(log.config.file_delete_delay_ms)
    names = files(log.directory)
    assert {n.split(".")[0] for n in names if n[0].isdigit()} == {f"{b:020d}" for b in bases(log)}
    assert {n for n in names if not n[0].isdigit()} == {"leader-epoch-checkpoint", "partition.metadata"}
    assert [n for n in names if n.endswith(".snapshot")] == [f"{b:020d}.snapshot" for b in bases(log)]
    assert not [name for name in files(log.directory) if name.endswith(".deleted")]
    assert all(r.offset >= 140 for r in log.read(0)), "nothing below the log start offset is readable"


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_retention_task_skips_compacted_logs(
    log_manager: ManagerFactory, clock: ManualClock, policy: str
) -> None:
    """With the cleaner disabled, compacted logs get no retention at all."""
    manager = log_manager(cleaner_enabled=False, policy=policy, segment_bytes=1024, retention_ms=600_000)
    [log] = manager.create_topic("topic", 1)
    for i in range(200):
        log.append_records([Record(0, -1, b"%d" % (i % 10), b"%d" % i)])
    set_mtimes(log, clock.now_ms())
    log.increment_log_start_offset(100)
    before = bases(log)

    clock.advance(600_001)

    assert manager.cleanup_logs() == []
    assert manager.cleanup_compacted_logs() == []
    assert bases(log) == before


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("compact", {START}), ("compact,delete", {START, TIME})],
)
def test_cleaner_threads_run_retention_for_compacted_logs(
    log_manager: ManagerFactory, clock: ManualClock, policy: str, expected: set[RetentionReason]
) -> None:
    """With the cleaner enabled, compacted logs' retention runs with the cleaner, not the task."""
    manager = log_manager(cleaner_enabled=True, policy=policy, segment_bytes=380, retention_ms=10_000)
    [log] = manager.create_topic("topic", 1)
    append_keyed(log, 15, timestamp=START_MS)
    log.increment_log_start_offset(5)
    clock.advance(10_001)

    assert manager.cleanup_logs() == []
    deleted = manager.cleanup_compacted_logs()

    assert {d.reason for d in deleted} == expected
    assert len(log.segments) == (2 if policy == "compact" else 1)


# -- open transactions ----------------------------------------------------------------------------


def test_last_stable_offset_is_clamped_to_the_log_start_offset(
    new_log: NewLog, retention: LogManager
) -> None:
    log = new_log(retention_ms=-1)

    def transactional(prefix: bytes, base_sequence: int) -> None:
        records = [Record(0, START_MS, None, b"%s%d" % (prefix, i)) for i in range(5)]
        log.append_records(
            records, producer_id=1, producer_epoch=0, base_sequence=base_sequence, is_transactional=True
        )

    transactional(b"t", 0)  # opens a transaction at offset 0
    log.append_records([Record(0, START_MS, None, b"p%d" % i) for i in range(3)])
    assert log.log_end_offset == 8
    log.roll()
    transactional(b"u", 5)  # the same transaction, still open
    assert log.last_stable_offset == 0

    log.increment_log_start_offset(8)
    assert run(retention, log) == [(0, START)]

    assert len(log.segments) == 1
    assert log.last_stable_offset == 8


# -- future timestamps and strictness ------------------------------------------------------------


def test_a_future_timestamp_blocks_time_retention_of_later_segments(
    new_log: NewLog, retention: LogManager, clock: ManualClock
) -> None:
    log = new_log(retention_ms=1000)
    hour = 3_600_000
    for timestamp in (START_MS - 10_000, START_MS + hour, START_MS - 10_000):
        append_plain(log, 1, timestamp=timestamp)
        log.roll()
    append_plain(log, 1, timestamp=START_MS - 10_000)  # S3: the active segment, non-empty, expired

    assert run(retention, log) == [(0, TIME)]
    assert bases(log) == [1, 2, 3]

    clock.advance(hour + 1000)
    assert run(retention, log) == [], "S1 is exactly retention.ms old: still kept"
    clock.advance(1)
    assert run(retention, log) == [(1, TIME), (2, TIME), (3, TIME)]
    assert bases(log) == [4]


def test_age_equal_to_retention_ms_is_kept(
    new_log: NewLog, retention: LogManager, clock: ManualClock
) -> None:
    log = new_log(retention_ms=1000)
    append_plain(log, 1, timestamp=START_MS)
    log.roll()
    append_plain(log, 1, timestamp=START_MS - 1)

    clock.advance(1000)
    assert run(retention, log) == []
    clock.advance(1)
    assert run(retention, log) == [(0, TIME), (1, TIME)]


def test_unlimited_retention_deletes_nothing(new_log: NewLog, retention: LogManager) -> None:
    log = new_log(segment_bytes=360, retention_ms=-1, retention_bytes=-1)
    append_plain(log, 15, timestamp=0)
    assert run(retention, log) == []
    assert len(log.segments) == 3


def test_segments_without_timestamps_age_from_their_mtime(
    new_log: NewLog, retention: LogManager, clock: ManualClock
) -> None:
    log = new_log(segment_bytes=360, retention_ms=1000)
    append_plain(log, 15)
    set_mtimes(log, START_MS)
    log.segments[0].set_last_modified_ms(START_MS - 1001)
    log.segments[1].set_last_modified_ms(START_MS - 1000)
    assert log.segments[0].largest_timestamp() == (START_MS - 1001, "mtime")

    assert run(retention, log) == [(0, TIME)]
    clock.advance(1)
    assert run(retention, log) == [(5, TIME)]


def test_a_record_timestamp_wins_over_the_mtime(
    new_log: NewLog, retention: LogManager, clock: ManualClock
) -> None:
    """The mtime stands in only when no record has a timestamp; one stamped record is enough."""
    log = new_log(retention_ms=1000)
    append_plain(log, 1)
    append_plain(log, 1, timestamp=START_MS)
    log.roll()
    set_mtimes(log, START_MS - 1_000_000)
    assert log.segments[0].largest_timestamp() == (START_MS, "record")
    assert run(retention, log) == []


def test_retention_reasons_match_explain(new_log: NewLog, retention: LogManager) -> None:
    """The plan ``explain`` shows is what a pass then deletes, with the same reasons."""
    log = new_log(segment_bytes=360, retention_bytes=1000, retention_ms=60_000)
    append_plain(log, 10, timestamp=START_MS - 120_000)
    append_plain(log, 10, timestamp=START_MS + 60_000)
    append_plain(log, 5, timestamp=START_MS - 120_000)
    log.increment_log_start_offset(5)
    verdicts = explain_log_retention(log, log.segments, now_ms=START_MS)
    expected = [(v.base_offset, v.reason) for v in verdicts if v.is_delete]
    assert expected == [(0, START), (5, SIZE)]
    assert run(retention, log) == expected

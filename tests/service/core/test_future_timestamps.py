"""``count_future_timestamp_segments`` on real logs: exactly the segments ``explain`` marks
``future-timestamp`` (a record stamped ahead of now, or no timestamp and a file modified ahead of now), and 0
wherever time retention does not run. (The series a daemon exports on ``/metrics`` are in
``tests/api/metrics/test_metrics.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.core.explain import explain_partition
from service.core.future_timestamps import count_future_timestamp_segments
from service.storage.log import PartitionLog
from service.storage.records import Record
from tests.service.retention_helpers import START_MS, new_partition_log

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
ONE_RECORD_SEGMENTS = 100  # segment.bytes: one ~73-byte batch per segment


def append(log: PartitionLog, *timestamps: int) -> None:
    """One batch of one record per timestamp given."""
    for timestamp in timestamps:
        log.append_records([Record(0, timestamp, b"key", b"value")])


def explained(log: PartitionLog, now_ms: int) -> int:
    doc = explain_partition(log, now_ms=now_ms, cleaner_enabled=True, cleaner_checkpoints={})
    segments = doc["segments"]
    assert isinstance(segments, list)
    return sum(1 for s in segments if s["reason"] == "future-timestamp")


def retained_log(
    directory: Path, clock: ManualClock, *, policy: str = "delete", **fields: object
) -> PartitionLog:
    settings: dict[str, object] = {"segment_bytes": ONE_RECORD_SEGMENTS, "retention_ms": HOUR_MS, **fields}
    return new_partition_log(directory, clock, policy=policy, **settings)


def test_the_count_is_the_segments_explain_marks_future_timestamp(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    now = clock.now_ms()
    stamped = retained_log(tmp_path / "events-0", clock)
    plain = retained_log(tmp_path / "events-1", clock)
    # expired, expired, a day ahead, expired, two days ahead, and the active segment (now)
    append(stamped, now - DAY_MS, now - DAY_MS, now + DAY_MS, now - DAY_MS, now + 2 * DAY_MS, now)
    append(plain, now - DAY_MS, now)

    def count(log: PartitionLog) -> int:
        return count_future_timestamp_segments(log, now_ms=clock.now_ms(), cleaner_enabled=True)

    assert count(stamped) == explained(stamped, now) == 2
    assert count(plain) == explained(plain, now) == 0
    clock.advance(DAY_MS + 1)
    assert count(stamped) == explained(stamped, clock.now_ms()) == 1
    clock.advance(DAY_MS)
    assert count(stamped) == explained(stamped, clock.now_ms()) == 0


def test_a_segment_without_timestamps_counts_by_its_files_mtime(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    now = clock.now_ms()
    log = retained_log(tmp_path / "events-0", clock)
    append(log, -1, -1)  # no record timestamp: a segment ages by its file's mtime
    ahead, active = log.segments
    ahead.set_last_modified_ms(now + DAY_MS)
    active.set_last_modified_ms(now)

    assert count_future_timestamp_segments(log, now_ms=now, cleaner_enabled=True) == explained(log, now) == 1
    ahead.set_last_modified_ms(now - 2 * HOUR_MS)
    assert count_future_timestamp_segments(log, now_ms=now, cleaner_enabled=True) == 0


@pytest.mark.parametrize(
    ("policy", "retention_ms", "cleaner_enabled", "expected"),
    [
        ("delete", HOUR_MS, False, 1),  # the cleaner plays no part in a delete-only log's retention
        ("delete", -1, True, 0),  # retention.ms=-1: time retention never runs
        ("compact", HOUR_MS, True, 0),  # compact only: no retention
        ("compact,delete", HOUR_MS, True, 1),
        ("compact,delete", HOUR_MS, False, 0),  # a compacted log's retention waits for the cleaner
    ],
)
def test_zero_wherever_time_retention_does_not_run(
    tmp_path: Path, policy: str, retention_ms: int, cleaner_enabled: bool, expected: int
) -> None:
    clock = ManualClock(START_MS)
    now = clock.now_ms()
    log = retained_log(tmp_path / "events-0", clock, policy=policy, retention_ms=retention_ms)
    append(log, now - DAY_MS, now + DAY_MS, now)

    assert count_future_timestamp_segments(log, now_ms=now, cleaner_enabled=cleaner_enabled) == expected

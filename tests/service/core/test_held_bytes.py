"""``partition_bytes``: every byte of a log's segments under exactly one reason (the rule of
``service.core.held_bytes``), and ``summary_document`` adding the partitions up."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from service.base.clock import ManualClock
from service.core.held_bytes import PartitionBytes, partition_bytes
from service.core.retention import explain_log_retention
from service.core.summary import summary_document, unloaded_dir_parts
from service.storage.log import PartitionLog
from service.storage.records import Record
from service.storage.segment import LogSegment
from tests.service.retention_helpers import START_MS, append_plain, bases, new_partition_log

NewLog = Callable[..., PartitionLog]
HOUR_MS = 3_600_000


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def new_log(tmp_path: Path, clock: ManualClock) -> NewLog:
    made: list[PartitionLog] = []

    def _new(policy: str = "delete", **config: Any) -> PartitionLog:
        directory = tmp_path / "logs" / f"topic-{len(made)}"
        made.append(new_partition_log(directory, clock, policy=policy, **config))
        return made[-1]

    return _new


def held(log: PartitionLog, **kwargs: Any) -> PartitionBytes:
    kwargs.setdefault("cleaner_enabled", True)
    kwargs.setdefault("checkpoint", None)
    part = partition_bytes(log, now_ms=START_MS, **kwargs)
    assert part.total_bytes == sum(s.size_bytes for s in log.segments), "every byte under one reason"
    return part


def keyed_log(new_log: NewLog, policy: str = "compact", **config: Any) -> PartitionLog:
    """Five segments of five 70-byte keyed batches (350 bytes each), stamped now; the last one active."""
    log = new_log(policy, segment_bytes=350, **config)
    for i in range(25):
        log.append_records([Record(0, START_MS, b"%d" % (i % 3), b"%d" % (i % 10))])
    assert bases(log) == [0, 5, 10, 15, 20]
    return log


def test_a_delete_log_by_retention_reason(new_log: NewLog) -> None:
    log = new_log(retention_ms=HOUR_MS)
    for timestamp in (START_MS - 2 * HOUR_MS, START_MS - HOUR_MS, START_MS - 2 * HOUR_MS):
        append_plain(log, 1, timestamp=timestamp)
        log.roll()
    part = held(log)
    assert part.by_reason == {
        "time": 72,
        "within-retention": 72,
        "blocked-by-earlier-segment": 72,
        "active-segment": 0,
    }
    assert part.retention_now_bytes == 72
    assert part.cleanable is None


def test_a_dirty_compacted_log_is_cleanable(new_log: NewLog) -> None:
    part = held(keyed_log(new_log))
    assert part.by_reason == {"cleanable": 4 * 350, "active-segment": 350}
    assert part.cleanable is not None and part.cleanable.cleanable_bytes == 4 * 350
    assert part.retention_now_bytes == 0


def test_the_clean_section_keeps_retention_reason(new_log: NewLog) -> None:
    part = held(keyed_log(new_log, min_cleanable_dirty_ratio=0.9), checkpoint=10)
    assert part.by_reason == {
        "policy-compact-only": 2 * 350,
        "below-min-dirty-ratio": 2 * 350,
        "active-segment": 350,
    }
    assert part.cleanable is not None, "cleaning it now (clean --topic --partition) would free bytes too"


def test_compaction_lag_and_uncleanable(new_log: NewLog) -> None:
    lagged = held(keyed_log(new_log, min_compaction_lag_ms=HOUR_MS))
    assert lagged.by_reason == {"compaction-lag": 4 * 350, "active-segment": 350}
    marked = held(keyed_log(new_log), is_uncleanable=True)
    assert marked.by_reason == {"uncleanable": 4 * 350, "active-segment": 350}


def test_whole_log_holds(new_log: NewLog) -> None:
    log = keyed_log(new_log)
    assert held(log, cleaner_enabled=False).by_reason == {"cleaner-disabled": 5 * 350}
    assert held(log, is_moving=True).by_reason == {"future-replica": 5 * 350}


def test_document_adds_up_and_names_the_largest(tmp_path: Path) -> None:
    parts = [
        PartitionBytes("a", i, {"time": 10 * i, "within-retention": 5}, retention_now_bytes=10 * i)
        for i in range(7)
    ]
    broken = PartitionBytes(None, None, error="Permission denied", path="/x")
    broken.add("unreadable", 0)
    doc: dict[str, Any] = summary_document([*parts, broken], generated_at_ms=START_MS)
    assert doc["total_bytes"] == sum(p.total_bytes for p in parts)
    assert sum(h["bytes"] for h in doc["held"]) == doc["total_bytes"]
    assert doc["partitions"] == 7
    time = doc["held"][0]
    assert (time["reason"], time["bytes"], time["partitions"]) == ("time", 210, 7)
    assert [t["partition"] for t in time["top"]] == [6, 5, 4, 3, 2]
    unreadable = next(h for h in doc["held"] if h["reason"] == "unreadable")
    assert unreadable["errors"] == [{"path": "/x", "error": "Permission denied"}]
    assert doc["reclaimable"] == {
        "retention_now": 210,
        "compaction": 0,
        "compaction_estimated": False,
        "compaction_unestimated_bytes": 0,
    }
    assert doc["generated_at"] == "2023-11-14T22:13:20.000Z"


def test_unloaded_dirs_count_whole(tmp_path: Path) -> None:
    deleted = tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete"
    future = tmp_path / "u-1.0123456789abcdef0123456789abcdef-future"
    for path, size in ((deleted, 100), (future, 30)):
        path.mkdir()
        (path / "00000000000000000000.log").write_bytes(b"x" * size)
        (path / "00000000000000000000.index").write_bytes(b"x" * 8)
    (tmp_path / "t-1").mkdir()
    parts = unloaded_dir_parts([tmp_path, tmp_path / "missing"])
    got = {(p.topic, p.partition): p.by_reason for p in parts}
    assert got == {
        ("t", 0): {"pending-delete": 100},
        ("u", 1): {"future-replica": 30},
        (None, None): {"unreadable": 0},
    }


@pytest.mark.parametrize(
    ("policy", "config"),
    [
        ("compact", {}),
        ("delete", {"retention_ms": -1, "retention_bytes": 700}),
        ("compact,delete", {"retention_ms": -1}),
    ],
)
def test_no_timestamp_is_read_where_time_retention_does_not_run(
    new_log: NewLog, monkeypatch: pytest.MonkeyPatch, policy: str, config: dict[str, int]
) -> None:
    log = keyed_log(new_log, policy, **config)
    expected = held(log).by_reason
    explained = {
        (v.base_offset, str(v.reason)) for v in explain_log_retention(log, log.segments, now_ms=START_MS)
    }

    def unread(_segment: LogSegment) -> tuple[int, str]:
        raise AssertionError("a largest timestamp was read")

    monkeypatch.setattr(LogSegment, "largest_timestamp", unread)
    assert held(log).by_reason == expected
    quick = explain_log_retention(log, log.segments, now_ms=START_MS, reasons_only=True)
    assert {(v.base_offset, str(v.reason)) for v in quick} == explained

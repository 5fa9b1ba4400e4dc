"""``explain_partition``: its JSON document, the retention reason of every segment, the cleaner's view.

The cleaner section follows Kafka's ``cleanableOffsets`` and ``LogToClean`` (as ``LogCleanerManagerTest``
checks them): the first dirty offset from the cleaner checkpoint, the first uncleanable offset at the active
segment (or earlier: an open transaction, ``min.compaction.lag.ms``) rounded down to a segment base, and a
dirty ratio that must be strictly above ``min.cleanable.dirty.ratio``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from service.base.clock import ManualClock
from service.base.wording import utc_date
from service.core.cleanable import UncleanableBound, cleanable_range, log_to_clean
from service.core.explain import explain_partition
from service.core.retention import RetentionReason, explain_retention
from service.storage.log import PartitionLog
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.retention_helpers import (
    START_MS,
    append_keyed,
    append_plain,
    bases,
    new_partition_log,
    set_mtimes,
)

NewLog = Callable[..., PartitionLog]
JsonDoc = dict[str, Any]

HOUR_MS = 3_600_000
TP = TopicPartition("topic", 0)

# `explain`: every key with its JSON type (extensions may add more keys).
PARTITION_FIELDS: dict[str, type] = {
    "topic": str,
    "partition": int,
    "log_dir": str,
    "log_start_offset": int,
    "log_end_offset": int,
    "cleanup_policy": str,
    "segments": list,
    "cleaner": dict,
}
SEGMENT_FIELDS: dict[str, type] = {
    "base_offset": int,
    "size_bytes": int,
    "largest_timestamp": int,
    "largest_timestamp_source": str,
    "verdict": str,
    "reason": str,
}
CLEANER_FIELDS: dict[str, type] = {
    "dirty_ratio": float,
    "first_dirty_offset": int,
    "first_uncleanable_offset": int,
    "would_clean": bool,
    "reason": str,
}
# The extensions docs/cli.md documents.
EXTRA_PARTITION_FIELDS: dict[str, type] = {
    "high_watermark": int,
    "size_bytes": int,
    "retention_ms": int,
    "retention_bytes": int,
}
EXTRA_CLEANER_FIELDS: dict[str, type] = {
    "min_cleanable_dirty_ratio": float,
    "cleanable_bytes": int,
    "clean_bytes": int,
    "max_compaction_delay_ms": int,
}
RETENTION_REASONS = {str(r) for r in RetentionReason}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def new_log(tmp_path: Path, clock: ManualClock) -> NewLog:
    def _new(policy: str = "delete", **config: Any) -> PartitionLog:
        return new_partition_log(tmp_path / "logs" / "topic-0", clock, policy=policy, **config)

    return _new


def explain(
    log: PartitionLog, *, cleaner_enabled: bool = True, checkpoint: int | None = None, now_ms: int = START_MS
) -> JsonDoc:
    checkpoints = {} if checkpoint is None else {log.topic_partition: checkpoint}
    doc = explain_partition(
        log, now_ms=now_ms, cleaner_enabled=cleaner_enabled, cleaner_checkpoints=checkpoints
    )
    assert json.loads(json.dumps(doc)) == doc, "a JSON document as it is"
    return doc


def reasons(doc: JsonDoc) -> list[tuple[int, str, str]]:
    """(base offset, verdict, reason) of every segment."""
    return [(s["base_offset"], s["verdict"], s["reason"]) for s in doc["segments"]]


def assert_fields(doc: JsonDoc, fields: dict[str, type]) -> None:
    for key, kind in fields.items():
        assert key in doc, f"missing {key!r}"
        assert type(doc[key]) is kind, f"{key!r} is {type(doc[key]).__name__}, not {kind.__name__}"


def five_segment_log(new_log: NewLog, policy: str = "delete", **config: Any) -> PartitionLog:
    """Five segments of five 70-byte keyed batches (350 bytes each), stamped now; the last one active."""
    log = new_log(policy, segment_bytes=350, **config)
    for i in range(25):
        log.append_records([Record(0, START_MS, b"%d" % (i % 3), b"%d" % (i % 10))])
    assert bases(log) == [0, 5, 10, 15, 20]
    assert {s.size_bytes for s in log.segments} == {350}
    return log


# -- the document's shape ---------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["delete", "compact", "compact,delete"])
def test_document_has_the_contract_fields_and_types(new_log: NewLog, policy: str) -> None:
    log = new_log(policy, segment_bytes=380, retention_ms=HOUR_MS, retention_bytes=10_000)
    append_keyed(log, 7, timestamp=START_MS - 2 * HOUR_MS)
    append_keyed(log, 4, timestamp=START_MS + HOUR_MS)
    doc = explain(log)

    assert_fields(doc, PARTITION_FIELDS | EXTRA_PARTITION_FIELDS)
    assert (doc["topic"], doc["partition"]) == ("topic", 0)
    assert doc["log_dir"] == str(log.directory.parent)
    assert (doc["log_start_offset"], doc["log_end_offset"], doc["high_watermark"]) == (0, 11, 11)
    assert doc["size_bytes"] == 11 * 76
    assert doc["cleanup_policy"] == policy
    assert (doc["retention_ms"], doc["retention_bytes"]) == (HOUR_MS, 10_000)
    assert [s["base_offset"] for s in doc["segments"]] == [0, 5, 10]
    for segment in doc["segments"]:
        assert_fields(segment, SEGMENT_FIELDS | {"detail": str})
        assert segment["verdict"] in ("delete", "keep")
        assert segment["reason"] in RETENTION_REASONS
        assert segment["largest_timestamp_source"] == "record"
        assert segment["size_bytes"] == (380 if segment["base_offset"] < 10 else 76)
    assert_fields(doc["cleaner"], CLEANER_FIELDS | EXTRA_CLEANER_FIELDS)


def test_timestamps_from_mtime_are_labelled(new_log: NewLog) -> None:
    log = new_log(segment_bytes=360)
    append_plain(log, 10)
    set_mtimes(log, START_MS - 5)
    segments = explain(log)["segments"]
    assert [(s["largest_timestamp"], s["largest_timestamp_source"]) for s in segments] == [
        (START_MS - 5, "mtime"),
        (START_MS - 5, "mtime"),
    ]


# -- retention reasons --------------------------------------------------------------------------------


def test_reasons_in_a_delete_log(new_log: NewLog) -> None:
    """Deleted by time; then kept young; then expired but blocked; then the empty active segment."""
    log = new_log(retention_ms=HOUR_MS)
    for timestamp in (START_MS - 2 * HOUR_MS, START_MS - HOUR_MS, START_MS - 2 * HOUR_MS):
        append_plain(log, 1, timestamp=timestamp)
        log.roll()
    doc = explain(log)
    assert reasons(doc) == [
        (0, "delete", "time"),
        (1, "keep", "within-retention"),
        (2, "keep", "blocked-by-earlier-segment"),
        (3, "keep", "active-segment"),
    ]
    young = doc["segments"][1]
    expires = utc_date(START_MS - HOUR_MS + HOUR_MS + 1)
    assert young["detail"] == f"age 1h 0m ≤ retention.ms (1h 0m); expires at {expires}", "age == limit: kept"
    assert "segment 1 (within-retention)" in doc["segments"][2]["detail"]
    assert doc["segments"][0]["detail"] == "age 2h 0m > retention.ms (1h 0m)"


def test_future_timestamp_holds_back_later_expired_segments(new_log: NewLog) -> None:
    log = new_log(retention_ms=1000)
    for timestamp in (START_MS - 10_000, START_MS + HOUR_MS, START_MS - 10_000):
        append_plain(log, 1, timestamp=timestamp)
        log.roll()
    append_plain(log, 1, timestamp=START_MS - 10_000)

    segments = explain(log)["segments"]

    assert reasons({"segments": segments}) == [
        (0, "delete", "time"),
        (1, "keep", "future-timestamp"),
        (2, "keep", "blocked-by-earlier-segment"),
        (3, "keep", "blocked-by-earlier-segment"),
    ]
    future = segments[1]
    assert future["future_by_ms"] == HOUR_MS
    assert future["largest_timestamp"] == START_MS + HOUR_MS
    assert f"expires only at {utc_date(START_MS + HOUR_MS + 1000 + 1)}" in future["detail"], "when it expires"
    assert all("future_by_ms" not in s for i, s in enumerate(segments) if i != 1)
    assert "segment 1 (future-timestamp)" in segments[2]["detail"]


def test_non_empty_active_segment_within_retention(new_log: NewLog) -> None:
    log = new_log(retention_ms=HOUR_MS)
    append_plain(log, 3, timestamp=START_MS)
    assert reasons(explain(log)) == [(0, "keep", "active-segment")]


def test_unlimited_retention_keeps_everything(new_log: NewLog) -> None:
    log = new_log(segment_bytes=360, retention_ms=-1)
    append_plain(log, 10, timestamp=0)
    doc = explain(log)
    assert reasons(doc) == [(0, "keep", "within-retention"), (5, "keep", "active-segment")]
    assert doc["segments"][0]["detail"] == "retention.ms=-1 (unlimited)"


def test_size_and_log_start_offset_deletions(new_log: NewLog) -> None:
    log = five_segment_log(new_log, retention_bytes=700)
    log.increment_log_start_offset(5)
    doc = explain(log)
    assert all(segment["detail"] for segment in doc["segments"]), "every verdict says why"
    assert "retention.bytes=700" in doc["segments"][1]["detail"]
    assert "log start offset 5" in doc["segments"][0]["detail"]
    assert reasons(doc) == [
        (0, "delete", "log-start-offset"),
        (5, "delete", "size"),
        (10, "delete", "size"),
        (15, "keep", "within-retention"),
        (20, "keep", "active-segment"),
    ]


def test_compact_only_log_keeps_all_but_start_offset_breaches(new_log: NewLog) -> None:
    log = five_segment_log(new_log, "compact", retention_ms=0, retention_bytes=0)
    log.increment_log_start_offset(7)
    assert reasons(explain(log, now_ms=START_MS + HOUR_MS)) == [
        (0, "delete", "log-start-offset"),
        (5, "keep", "policy-compact-only"),
        (10, "keep", "policy-compact-only"),
        (15, "keep", "policy-compact-only"),
        (20, "keep", "policy-compact-only"),
    ]


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_compacted_logs_with_the_cleaner_disabled_get_no_retention(new_log: NewLog, policy: str) -> None:
    log = five_segment_log(new_log, policy, retention_ms=0)
    log.increment_log_start_offset(7)
    doc = explain(log, cleaner_enabled=False, now_ms=START_MS + HOUR_MS)
    assert {(s["verdict"], s["reason"]) for s in doc["segments"]} == {("keep", "cleaner-disabled")}
    assert (doc["cleaner"]["would_clean"], doc["cleaner"]["reason"]) == (False, "cleaner-disabled")


def test_delete_logs_with_the_cleaner_disabled_still_get_retention(new_log: NewLog) -> None:
    log = five_segment_log(new_log, retention_ms=0)
    doc = explain(log, cleaner_enabled=False, now_ms=START_MS + 1)
    assert {(s["verdict"], s["reason"]) for s in doc["segments"]} == {("delete", "time")}


def test_compact_delete_log_gets_time_retention(new_log: NewLog) -> None:
    log = five_segment_log(new_log, "compact,delete", retention_ms=HOUR_MS)
    assert [s["verdict"] for s in explain(log, now_ms=START_MS + HOUR_MS + 1)["segments"]] == ["delete"] * 5


def test_above_high_watermark(new_log: NewLog) -> None:
    """The high watermark is the LEO here; a lower one (a replicated log's) holds expired segments back."""
    log = five_segment_log(new_log, retention_ms=0)
    verdicts = explain_retention(
        log.segments,
        log.config,
        now_ms=START_MS + 1,
        log_start_offset=0,
        log_end_offset=log.log_end_offset,
        high_watermark=12,
    )
    assert [(v.base_offset, v.is_delete, v.reason) for v in verdicts] == [
        (0, True, RetentionReason.TIME),
        (5, True, RetentionReason.TIME),
        (10, False, RetentionReason.ABOVE_HIGH_WATERMARK),
        (15, False, RetentionReason.ABOVE_HIGH_WATERMARK),
        (20, False, RetentionReason.ABOVE_HIGH_WATERMARK),
    ]
    assert verdicts[2].detail == "holds offsets up to 14, past the high watermark 12"


# -- the cleaner section ----------------------------------------------------------------------------


def cleaner(log: PartitionLog, **kwargs: Any) -> tuple[float, int, int, bool, str]:
    view = explain(log, **kwargs)["cleaner"]
    return (
        view["dirty_ratio"],
        view["first_dirty_offset"],
        view["first_uncleanable_offset"],
        view["would_clean"],
        view["reason"],
    )


@pytest.mark.parametrize(
    ("checkpoint", "expected"),
    [
        (None, (1.0, 0, 20, True, "dirty-ratio-above-min-cleanable-ratio")),
        (5, (0.75, 5, 20, True, "dirty-ratio-above-min-cleanable-ratio")),
        (10, (0.5, 10, 20, False, "dirty-ratio-at-or-below-min-cleanable-ratio")),
        (15, (0.25, 15, 20, False, "dirty-ratio-at-or-below-min-cleanable-ratio")),
        (20, (0.0, 20, 20, False, "no-cleanable-bytes")),
    ],
)
def test_dirty_ratio_from_the_checkpoint(
    new_log: NewLog, checkpoint: int | None, expected: tuple[float, int, int, bool, str]
) -> None:
    """The range ends at the active segment; a ratio equal to the minimum (0.5) does not clean."""
    log = five_segment_log(new_log, "compact")
    assert cleaner(log, checkpoint=checkpoint) == expected


def test_ratio_just_below_the_checkpointed_one_cleans(new_log: NewLog) -> None:
    log = five_segment_log(new_log, "compact", min_cleanable_dirty_ratio=0.49)
    assert cleaner(log, checkpoint=10) == (0.5, 10, 20, True, "dirty-ratio-above-min-cleanable-ratio")


def test_dirty_offset_inside_a_segment_counts_it_as_both_clean_and_dirty(new_log: NewLog) -> None:
    """``LogToClean``: a first dirty offset in the middle of a segment counts that segment on both sides."""
    log = five_segment_log(new_log, "compact")
    view = explain(log, checkpoint=12)["cleaner"]
    assert (view["clean_bytes"], view["cleanable_bytes"]) == (3 * 350, 2 * 350)
    assert view["dirty_ratio"] == 0.4


@pytest.mark.parametrize("checkpoint", [26, 2])
def test_an_invalid_checkpoint_restarts_from_the_log_start_offset(new_log: NewLog, checkpoint: int) -> None:
    """A checkpoint past the log end, or below the log start offset, gives the log start offset."""
    log = five_segment_log(new_log, "compact")
    log.increment_log_start_offset(5)
    assert cleaner(log, checkpoint=checkpoint)[1] == 5
    assert cleanable_range(log, checkpoint, START_MS).checkpoint_was_reset


def test_max_compaction_lag_overdue_cleans_below_the_ratio(new_log: NewLog) -> None:
    log = five_segment_log(new_log, "compact", max_compaction_lag_ms=HOUR_MS)
    assert cleaner(log, checkpoint=15)[3:] == (False, "dirty-ratio-at-or-below-min-cleanable-ratio")
    later = START_MS + HOUR_MS + 10
    view = explain(log, checkpoint=15, now_ms=later)["cleaner"]
    assert view["max_compaction_delay_ms"] == 10
    assert (view["would_clean"], view["reason"]) == (True, "max-compaction-lag-exceeded")


def test_delete_logs_are_not_compacted(new_log: NewLog) -> None:
    log = five_segment_log(new_log)
    assert cleaner(log)[3:] == (False, "not-compacted")


def test_only_the_active_segment_has_nothing_to_clean(new_log: NewLog) -> None:
    log = new_log("compact")
    append_keyed(log, 5, timestamp=START_MS)
    assert cleaner(log) == (0.0, 0, 0, False, "no-cleanable-bytes")


# -- cleanable offsets -----------------------------------------------------------------------------------


def eight_segments(log: PartitionLog, timestamp: int, until: int = 8) -> None:
    while len(log.segments) < until:
        log.append_records([Record(0, timestamp, b"k", b"v")])


def test_an_open_transaction_bounds_the_range(new_log: NewLog) -> None:
    """The last stable offset (not a lower high watermark) stops the range at 22."""
    log = five_segment_log(new_log, "compact")
    log.append_records([Record(0, START_MS, b"t", b"x")])  # offset 25 opens segment 25
    log.append_records(  # offset 26, in segment 25, opens a transaction
        [Record(0, START_MS, b"t", b"x")],
        producer_id=8,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    eight_segments(log, START_MS, until=9)
    assert log.last_stable_offset == 26
    assert cleanable_range(log, None, START_MS).first_uncleanable_offset == 26
    assert cleanable_range(log, None, START_MS).bounded_by is UncleanableBound.OPEN_TRANSACTION
    assert log_to_clean(log, None, START_MS).first_uncleanable_offset == 25, "rounded to its segment"


def test_the_range_ends_at_the_active_segment(new_log: NewLog) -> None:
    log = new_log("compact", segment_bytes=350)
    eight_segments(log, START_MS)
    active = log.active_segment.base_offset
    assert (cleanable_range(log, None, START_MS).first_uncleanable_offset, active) == (active, 35)
    assert cleanable_range(log, None, START_MS).bounded_by is UncleanableBound.ACTIVE_SEGMENT


def test_min_compaction_lag_stops_at_the_first_young_segment(new_log: NewLog, clock: ManualClock) -> None:
    log = new_log("compact", segment_bytes=350, min_compaction_lag_ms=HOUR_MS)
    eight_segments(log, clock.now_ms(), until=4)
    young = log.active_segment.base_offset
    clock.advance(HOUR_MS + 1)
    eight_segments(log, clock.now_ms())
    offsets = cleanable_range(log, None, clock.now_ms())
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_offset) == (0, young)
    assert offsets.bounded_by is UncleanableBound.MIN_COMPACTION_LAG
    cleaner = explain(log, now_ms=clock.now_ms())["cleaner"]
    assert (cleaner["first_uncleanable_offset"], cleaner["first_uncleanable_reason"]) == (
        young,
        "min-compaction-lag",
    )


def test_min_compaction_lag_passed_for_all(new_log: NewLog, clock: ManualClock) -> None:
    log = new_log("compact", segment_bytes=350, min_compaction_lag_ms=HOUR_MS)
    eight_segments(log, clock.now_ms())
    assert cleanable_range(log, None, clock.now_ms()).first_uncleanable_offset == 0, "too young"
    clock.advance(HOUR_MS + 1)
    offsets = cleanable_range(log, None, clock.now_ms())
    assert (offsets.first_dirty_offset, offsets.first_uncleanable_offset) == (0, bases(log)[-1])

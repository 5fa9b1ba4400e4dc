"""Kafka's retention rules (``UnifiedLog.deleteOldSegments``), as one pure walk.

Order: log-start-offset breach, then size (``retention.bytes``), then time (``retention.ms``); compact-only
logs get the start-offset step alone. Each step walks from the oldest segment and stops at the first one it
may not delete, so only a prefix of the log ever goes; nothing at or past the high watermark goes; an empty
active segment never goes. Time compares ``now − largestTimestamp > retention.ms`` (strictly), with the
file mtime standing in only when no record has a timestamp — so one segment stamped in the future holds
back every later one. When every segment goes, the log rolls first so that it always has one.

``plan_retention`` decides; ``PartitionLog.delete_oldest_segments`` acts. ``explain`` also says, for every
segment kept, why: that is the part Kafka does not tell its operators.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import TYPE_CHECKING, NamedTuple

from service.base.wording import human_duration, utc_date
from service.storage.log_config import LogConfig
from service.storage.segment import LogSegment

if TYPE_CHECKING:
    from service.storage.log import PartitionLog

__all__ = [
    "CLEANER_DISABLED_HOLD",
    "FUTURE_REPLICA_HOLD",
    "LogHold",
    "RetentionPlan",
    "RetentionReason",
    "SegmentVerdict",
    "explain_log_retention",
    "explain_retention",
    "log_hold",
    "plan_retention",
]


class RetentionReason(enum.StrEnum):
    # why a segment is deleted
    LOG_START_OFFSET = "log-start-offset"
    SIZE = "size"
    TIME = "time"
    # why a segment is kept
    ACTIVE_SEGMENT = "active-segment"
    WITHIN_RETENTION = "within-retention"
    FUTURE_TIMESTAMP = "future-timestamp"
    BLOCKED_BY_EARLIER_SEGMENT = "blocked-by-earlier-segment"
    ABOVE_HIGH_WATERMARK = "above-high-watermark"
    POLICY_COMPACT_ONLY = "policy-compact-only"
    CLEANER_DISABLED = "cleaner-disabled"
    UNKNOWN_TOPIC_CONFIG = "unknown-topic-config"  # held until the topic's configs are imported or set
    FUTURE_REPLICA = "future-replica"  # a move between log dirs is under way: paused, as in Kafka


UNKNOWN_CONFIGS_HELD = (
    "the topic's configs are unknown (a broker's dir without its metadata log: they are in ZooKeeper or "
    "the metadata log): held until `logcleaner topic-config --import` or an override sets them, or "
    "unknown.topic.configs=broker-defaults"
)


@dataclass(frozen=True, slots=True)
class LogHold:
    """Why retention does not run on a whole log, as ``explain`` says it of each segment."""

    reason: RetentionReason
    detail: str


# Kafka runs no retention on a compacted log while its cleaner is disabled.
CLEANER_DISABLED_HOLD = LogHold(
    RetentionReason.CLEANER_DISABLED,
    "compacted log and log.cleaner.enable=false: no retention. Remedy: log.cleaner.enable=true",
)
# Kafka pauses a partition whose future replica exists (abortAndPauseCleaning); cleanupLogs passes it over.
FUTURE_REPLICA_HOLD = LogHold(
    RetentionReason.FUTURE_REPLICA,
    "a move between log dirs is under way (a -future replica): paused, as Kafka pauses it, until a restart "
    "after the broker promoted it",
)


def log_hold(config: LogConfig, *, cleaner_enabled: bool, is_moving: bool) -> LogHold | None:
    """Why no retention runs on a log at all, or None: a compacted log with the cleaner off, a partition
    moving between log dirs (paused by the cleaner, as Kafka pauses it)."""
    if config.is_compacted and not cleaner_enabled:
        return CLEANER_DISABLED_HOLD
    if is_moving and cleaner_enabled:
        return FUTURE_REPLICA_HOLD
    return None


class RetentionPlan(NamedTuple):
    """How many of the oldest segments each step deletes (they follow one another), and whether to roll."""

    log_start_offset_count: int = 0
    size_count: int = 0
    time_count: int = 0
    roll_first: bool = False

    @property
    def total(self) -> int:
        return self.log_start_offset_count + self.size_count + self.time_count

    def reasons(self) -> list[RetentionReason]:
        """The reason for each segment to delete, oldest first."""
        return (
            [RetentionReason.LOG_START_OFFSET] * self.log_start_offset_count
            + [RetentionReason.SIZE] * self.size_count
            + [RetentionReason.TIME] * self.time_count
        )


class SegmentVerdict(NamedTuple):
    base_offset: int
    size_bytes: int
    largest_timestamp: int
    largest_timestamp_source: str
    is_delete: bool
    reason: RetentionReason
    detail: str = ""
    future_by_ms: int | None = None


_NOTHING_DUE = RetentionPlan()
# retention.ms in words, said of every segment kept or deleted by time: a broker has few distinct values.
_retention_words = lru_cache(maxsize=256)(human_duration)
_SIZE_BYTES = attrgetter("size_bytes")


class _LogState(NamedTuple):
    """What the steps read of one log (a tuple: built once per log and pass, so cheaply)."""

    segments: Sequence[LogSegment]
    log_start_offset: int
    log_end_offset: int
    high_watermark: int

    def upper(self, index: int) -> int:
        """The offset after segment ``index``: the next segment's base, or the LEO for the active one."""
        if index + 1 < len(self.segments):
            return self.segments[index + 1].base_offset
        return self.log_end_offset

    def may_delete(self, index: int) -> bool:
        """The gates every step shares: below the high watermark, and not the empty active segment.

        Each step tests its own condition first and calls this only when it holds: with nothing due, a
        pass then costs one comparison per step and log.
        """
        is_active = index == len(self.segments) - 1
        if is_active and self.segments[index].size_bytes == 0:
            return False
        return self.high_watermark >= self.upper(index)


def plan_retention(
    segments: Sequence[LogSegment],
    config: LogConfig,
    *,
    now_ms: int,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int,
    log_size_bytes: int | None = None,
) -> RetentionPlan:
    """Kafka's three steps on the current segments; no I/O when nothing is due (timestamps are cached).

    ``log_size_bytes`` is the segments' total size if the caller knows it (``PartitionLog.size_bytes``,
    kept up to date); without it the size step sums the segments. With nothing due a plan reads each
    step's first segment only: a few µs a log, whatever its segment count.
    """
    if config.configs_unknown:
        return _NOTHING_DUE  # its own retention is not known: left alone
    state = _LogState(segments, log_start_offset, log_end_offset, high_watermark)
    start = _count_start_offset_breach(state, 0)
    if not config.has_delete_policy:
        return RetentionPlan(start, 0, 0, roll_first=start == len(segments)) if start else _NOTHING_DUE
    size = _count_size_breach(state, start, config.retention_bytes, log_size_bytes)
    time = _count_time_breach(state, start + size, config.retention_ms, now_ms)
    total = start + size + time
    if total == 0:
        return _NOTHING_DUE
    return RetentionPlan(start, size, time, roll_first=total == len(segments))


def _count_start_offset_breach(state: _LogState, first: int) -> int:
    count = 0
    for index in range(first, len(state.segments) - 1):  # never the active segment: it has no successor
        if not (state.upper(index) <= state.log_start_offset and state.may_delete(index)):
            break
        count += 1
    return count


def _count_size_breach(state: _LogState, first: int, retention_bytes: int, log_size_bytes: int | None) -> int:
    if retention_bytes < 0:
        return 0
    if log_size_bytes is None:
        log_size_bytes = sum(map(_SIZE_BYTES, state.segments))
    # What the earlier step deletes no longer counts.
    excess = log_size_bytes - sum(map(_SIZE_BYTES, state.segments[:first])) - retention_bytes
    if excess < 0:
        return 0
    count = 0
    for index in range(first, len(state.segments)):
        size = state.segments[index].size_bytes
        if not (excess - size >= 0 and state.may_delete(index)):
            break
        excess -= size
        count += 1
    return count


def _count_time_breach(state: _LogState, first: int, retention_ms: int, now_ms: int) -> int:
    if retention_ms < 0:
        return 0
    count = 0
    for index in range(first, len(state.segments)):
        largest, _source = state.segments[index].largest_timestamp()
        if not (now_ms - largest > retention_ms and state.may_delete(index)):
            break
        count += 1
    return count


def explain_log_retention(
    log: PartitionLog,
    segments: Sequence[LogSegment],
    *,
    now_ms: int,
    held: LogHold | None = None,
    reasons_only: bool = False,
) -> list[SegmentVerdict]:
    """``explain_retention`` of ``log`` as it stands: its config and offsets; ``segments`` = ``log.segments``,
    read by the caller under ``log.lock``."""
    return explain_retention(
        segments,
        log.config,
        now_ms=now_ms,
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        high_watermark=log.high_watermark,
        held=held,
        reasons_only=reasons_only,
    )


def explain_retention(
    segments: Sequence[LogSegment],
    config: LogConfig,
    *,
    now_ms: int,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int,
    held: LogHold | None = None,
    reasons_only: bool = False,
) -> list[SegmentVerdict]:
    """A verdict for every segment: the plan's deletions with their step, and why each other one stays.

    ``held``: why no retention runs on the log at all (``CLEANER_DISABLED_HOLD``, ``FUTURE_REPLICA_HOLD``):
    every segment stays with that reason. ``reasons_only`` (the summary, which counts bytes by reason):
    no ``detail`` sentence, and a segment's largest timestamp unread (``-1``, source ``unread``) where time
    retention does not run: a compact-only policy or ``retention.ms=-1``, where no verdict depends on it.
    """
    state = _LogState(segments, log_start_offset, log_end_offset, high_watermark)
    if reasons_only and (not config.has_delete_policy or config.retention_ms < 0):
        return _verdicts_without_time(state, config, now_ms, held)
    deleted = _deleting_reasons(state, config, now_ms, held)
    verdicts = []
    blocker: SegmentVerdict | None = None
    for index, segment in enumerate(segments):
        largest, source = segment.largest_timestamp()
        base = (segment.base_offset, segment.size_bytes, largest, source)
        if index < len(deleted):
            reason = deleted[index]
            detail = "" if reasons_only else _deleted_detail(reason, state, index, config, now_ms, largest)
            verdicts.append(SegmentVerdict(*base, is_delete=True, reason=reason, detail=detail))
            continue
        reason, future_by_ms = _why_kept(state, index, config, now_ms, largest, held)
        detail = ""
        if reason is RetentionReason.TIME:  # expired, yet kept: an earlier segment holds it back
            reason = RetentionReason.BLOCKED_BY_EARLIER_SEGMENT
            if not reasons_only:
                held_by = (
                    f"segment {blocker.base_offset} ({blocker.reason})" if blocker else "an earlier segment"
                )
                detail = f"expired, but {held_by} before it is kept"
        elif not reasons_only:
            detail = _kept_detail(reason, state, index, config, now_ms, largest, held)
        verdict = SegmentVerdict(
            *base, is_delete=False, reason=reason, detail=detail, future_by_ms=future_by_ms
        )
        blocker = blocker or verdict
        verdicts.append(verdict)
    return verdicts


def _deleting_reasons(
    state: _LogState, config: LogConfig, now_ms: int, held: LogHold | None
) -> list[RetentionReason]:
    """The plan's reason for each segment it deletes, oldest first (none where the log is held)."""
    if held is not None:
        return []
    plan = plan_retention(
        state.segments,
        config,
        now_ms=now_ms,
        log_start_offset=state.log_start_offset,
        log_end_offset=state.log_end_offset,
        high_watermark=state.high_watermark,
    )
    return plan.reasons()


def _verdicts_without_time(
    state: _LogState, config: LogConfig, now_ms: int, held: LogHold | None
) -> list[SegmentVerdict]:
    """``explain_retention``'s reasons where time retention does not run (no timestamp read): only the
    log-start-offset and size steps delete, and no keep reason depends on a timestamp."""
    segments = state.segments
    deleted = _deleting_reasons(state, config, now_ms, held)
    verdicts = []
    for index, segment in enumerate(segments):
        base = (segment.base_offset, segment.size_bytes, -1, "unread")
        if index < len(deleted):
            verdicts.append(SegmentVerdict(*base, is_delete=True, reason=deleted[index]))
        else:
            reason, future_by_ms = _why_kept(state, index, config, now_ms, -1, held)
            verdicts.append(SegmentVerdict(*base, is_delete=False, reason=reason, future_by_ms=future_by_ms))
    return verdicts


def _why_kept(
    state: _LogState, index: int, config: LogConfig, now_ms: int, largest: int, held: LogHold | None
) -> tuple[RetentionReason, int | None]:
    """Why segment ``index`` stays, and by how much its largest timestamp is in the future (or None).
    TIME means "would be deleted by time on its own" (for blocking)."""
    if config.configs_unknown:
        return RetentionReason.UNKNOWN_TOPIC_CONFIG, None
    if held is not None:
        return held.reason, None
    is_active = index == len(state.segments) - 1
    if is_active and state.segments[index].size_bytes == 0:
        return RetentionReason.ACTIVE_SEGMENT, None
    if state.high_watermark < state.upper(index):
        return RetentionReason.ABOVE_HIGH_WATERMARK, None
    if not config.has_delete_policy:
        return RetentionReason.POLICY_COMPACT_ONLY, None
    if largest > now_ms and config.retention_ms >= 0:
        return RetentionReason.FUTURE_TIMESTAMP, largest - now_ms
    if config.retention_ms >= 0 and now_ms - largest > config.retention_ms:
        return RetentionReason.TIME, None  # expired by itself: only an earlier segment can hold it back
    return (RetentionReason.ACTIVE_SEGMENT if is_active else RetentionReason.WITHIN_RETENTION), None


def _kept_detail(
    reason: RetentionReason,
    state: _LogState,
    index: int,
    config: LogConfig,
    now_ms: int,
    largest: int,
    held: LogHold | None,
) -> str:
    """The one-line why of a KEEP verdict for ``reason`` (``_why_kept``'s)."""
    if reason is RetentionReason.UNKNOWN_TOPIC_CONFIG:
        return UNKNOWN_CONFIGS_HELD
    if held is not None:
        return held.detail
    if reason is RetentionReason.ACTIVE_SEGMENT and state.segments[index].size_bytes == 0:
        return "the empty active segment is never deleted"
    if reason is RetentionReason.ABOVE_HIGH_WATERMARK:
        upper = state.upper(index)
        return f"holds offsets up to {upper - 1}, past the high watermark {state.high_watermark}"
    if reason is RetentionReason.POLICY_COMPACT_ONLY:
        return "cleanup.policy=compact: only log-start-offset retention"
    if reason is RetentionReason.FUTURE_TIMESTAMP:
        return (
            f"largest timestamp {human_duration(largest - now_ms)} in the future; it expires only at "
            f"{utc_date(largest + config.retention_ms + 1)}. Remedy: delete-records up to offset "
            f"{state.upper(index)} (the segment's end) removes it; message.timestamp.type=LogAppendTime (or "
            "message.timestamp.after.max.ms) keeps new records from doing the same"
        )
    return _within(config, now_ms, largest)


def _deleted_detail(
    reason: RetentionReason, state: _LogState, index: int, config: LogConfig, now_ms: int, largest: int
) -> str:
    """The one-line why of a DELETE verdict, as the kept verdicts have theirs."""
    if reason is RetentionReason.LOG_START_OFFSET:
        return f"offsets below {state.upper(index)}, before the log start offset {state.log_start_offset}"
    if reason is RetentionReason.TIME:
        return (
            f"age {human_duration(now_ms - largest)} > retention.ms ({_retention_words(config.retention_ms)})"
        )
    return f"the log is over retention.bytes={config.retention_bytes} without it"


def _within(config: LogConfig, now_ms: int, largest: int) -> str:
    if config.retention_ms < 0:
        return "retention.ms=-1 (unlimited)"
    return (
        f"age {human_duration(now_ms - largest)} ≤ retention.ms ({_retention_words(config.retention_ms)}); "
        f"expires at {utc_date(largest + config.retention_ms + 1)}"
    )

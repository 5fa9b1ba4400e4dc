"""Why each byte of a partition's segments is still on disk: one reason per segment (issue 50).

The rule, in order (``docs/bytes-held.md`` has the table operators read):

1. A segment retention would delete now counts under its deleting reason (``log-start-offset``, ``size``,
   ``time``): those bytes are also ``retention_now``.
2. A segment of a log that retention and the cleaner leave alone whole counts under that hold
   (``unknown-topic-config``, ``future-replica``, ``cleaner-disabled``).
3. A compacted log's dirty section (a sealed segment holding offsets at or past the first dirty offset)
   counts under the cleaner's reason: ``uncleanable`` (the cleaner gave up on the log), else, below the first
   uncleanable offset, ``cleanable`` (the cleaner picks the log at its next round) or
   ``below-min-dirty-ratio``; past it, what sets that offset (``compaction-lag``, ``above-high-watermark``,
   ``open-transaction``).
4. Any other segment counts under retention's keep reason (``active-segment``, ``within-retention``,
   ``future-timestamp``, ``blocked-by-earlier-segment``, ``above-high-watermark``, ``policy-compact-only``):
   a compacted log's clean section is ``policy-compact-only`` or its retention reason, and a compact-only
   log's active segment is ``active-segment``.

Dirs that are not loaded logs count whole: ``stray``, ``future-replica`` (the copy a move is building),
``pending-delete`` (a deleted partition's ``-delete`` dir) and ``unreadable`` (with the error).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from service.core.cleanable import CleanerReason, LogToClean, UncleanableBound, log_to_clean
from service.core.retention import (
    RetentionReason,
    SegmentVerdict,
    explain_log_retention,
    log_hold,
)
from service.storage.log import PartitionLog

__all__ = [
    "CLEANABLE",
    "BELOW_MIN_DIRTY_RATIO",
    "COMPACTION_LAG",
    "OPEN_TRANSACTION",
    "PENDING_DELETE",
    "STRAY",
    "UNCLEANABLE",
    "UNREADABLE",
    "PartitionBytes",
    "partition_bytes",
]

CLEANABLE = "cleanable"
BELOW_MIN_DIRTY_RATIO = "below-min-dirty-ratio"
COMPACTION_LAG = "compaction-lag"
OPEN_TRANSACTION = "open-transaction"
UNCLEANABLE = "uncleanable"
STRAY = "stray"
PENDING_DELETE = "pending-delete"
UNREADABLE = "unreadable"
FUTURE_REPLICA = str(RetentionReason.FUTURE_REPLICA)

_WHOLE_LOG_HOLDS = frozenset(
    {RetentionReason.UNKNOWN_TOPIC_CONFIG, RetentionReason.FUTURE_REPLICA, RetentionReason.CLEANER_DISABLED}
)
_PAST_UNCLEANABLE = {
    UncleanableBound.MIN_COMPACTION_LAG: COMPACTION_LAG,
    UncleanableBound.ABOVE_HIGH_WATERMARK: str(RetentionReason.ABOVE_HIGH_WATERMARK),
    UncleanableBound.OPEN_TRANSACTION: OPEN_TRANSACTION,
    UncleanableBound.ACTIVE_SEGMENT: str(RetentionReason.ACTIVE_SEGMENT),
}


@dataclass(slots=True)
class PartitionBytes:
    """One partition dir's bytes by reason, and what retention would delete of them now.

    ``cleanable``: the candidate a round would take if the log were cleaned now (None: not compacted, held,
    uncleanable, or nothing dirty below its active segment); ``compaction_freed_bytes``: what that round
    would free, measured (``compaction_exact``) or estimated, None if neither was possible; ``error``: why
    a dir counted ``unreadable`` could not be read.
    """

    topic: str | None  # None: a log dir that could not be listed
    partition: int | None
    by_reason: dict[str, int] = field(default_factory=dict)
    retention_now_bytes: int = 0
    cleanable: LogToClean | None = None
    compaction_freed_bytes: int | None = None
    compaction_exact: bool = False
    error: str | None = None
    path: str | None = None  # a dir that is not a loaded log (stray, -future, -delete, unreadable)

    def add(self, reason: str, size_bytes: int) -> None:
        self.by_reason[reason] = self.by_reason.get(reason, 0) + size_bytes

    @property
    def total_bytes(self) -> int:
        return sum(self.by_reason.values())


def partition_bytes(
    log: PartitionLog,
    *,
    now_ms: int,
    cleaner_enabled: bool,
    checkpoint: int | None,
    is_moving: bool = False,
    is_uncleanable: bool = False,
) -> PartitionBytes:
    """The bytes of ``log``'s segments by reason (the module's rule), read under the log's lock as
    ``explain`` reads it; no record is read (a sealed segment's largest timestamp: its time index, and only
    where time retention runs)."""
    config = log.config
    tp = log.topic_partition
    out = PartitionBytes(tp.topic, tp.partition)
    with log.lock:
        segments = log.segments
        held = log_hold(config, cleaner_enabled=cleaner_enabled, is_moving=is_moving)
        verdicts = explain_log_retention(log, segments, now_ms=now_ms, held=held, reasons_only=True)
        candidate = None
        if config.is_compacted and cleaner_enabled and not config.configs_unknown:
            candidate = log_to_clean(log, checkpoint, now_ms)
    cleaner_reason = None
    if candidate is not None and not is_moving:
        would_clean, why = candidate.verdict(config.min_cleanable_dirty_ratio)
        if is_uncleanable:
            cleaner_reason = UNCLEANABLE
        elif would_clean:
            cleaner_reason = CLEANABLE
            out.cleanable = candidate
        elif why is CleanerReason.DIRTY_RATIO_AT_OR_BELOW_THRESHOLD:
            cleaner_reason = BELOW_MIN_DIRTY_RATIO
            out.cleanable = candidate  # `clean --topic --partition` cleans it whatever its ratio
    for index, verdict in enumerate(verdicts):
        upper = verdicts[index + 1].base_offset if index + 1 < len(verdicts) else None
        reason = _reason(verdict, upper, candidate, cleaner_reason)
        out.add(reason, verdict.size_bytes)
        if verdict.is_delete:
            out.retention_now_bytes += verdict.size_bytes
    return out


def _reason(
    verdict: SegmentVerdict, upper: int | None, candidate: LogToClean | None, cleaner_reason: str | None
) -> str:
    """Rules 1 to 4 for one segment; ``upper`` is the next segment's base (None: the active segment)."""
    if verdict.is_delete or verdict.reason in _WHOLE_LOG_HOLDS:
        return str(verdict.reason)
    if upper is None and verdict.reason is RetentionReason.POLICY_COMPACT_ONLY:
        return str(RetentionReason.ACTIVE_SEGMENT)  # what keeps it first: no cleaner touches it
    if candidate is None or upper is None or upper <= candidate.first_dirty_offset:
        return str(verdict.reason)  # not compacted, the active segment, or the clean section
    if cleaner_reason == UNCLEANABLE:
        return UNCLEANABLE
    if verdict.base_offset < candidate.first_uncleanable_offset:
        return cleaner_reason or str(verdict.reason)
    return _PAST_UNCLEANABLE[candidate.bounded_by]

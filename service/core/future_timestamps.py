"""How many segments of a log time retention holds back because their timestamp is in the future.

The count is exactly the segments ``logcleaner explain`` marks ``future-timestamp``. Running the explain
walk for every log at every scrape would cost too much, so a scan of the segments' largest timestamps
(kept in memory once read) comes first, and only a log with a segment stamped ahead of now is explained.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from service.core.retention import RetentionReason, explain_retention
from service.storage.log import PartitionLog
from service.storage.segment import LogSegment

__all__ = ["count_future_timestamp_segments"]

_MAX_TIMESTAMP = attrgetter("max_timestamp_so_far")


def count_future_timestamp_segments(log: PartitionLog, *, now_ms: int, cleaner_enabled: bool) -> int:
    """Segments kept by time retention because their largest timestamp is after ``now_ms``.

    Reads the log's snapshot (``PartitionLog.snapshot``), never its lock: a segment that retention
    deletes meanwhile makes an index read fail, and the caller keeps its last count. Zero where time
    retention does not run: ``retention.ms=-1``, a compact-only policy, or a compacted log with the cleaner
    disabled. The first call may read each sealed segment's last time-index entry; later calls read memory
    only. Raises ``OSError`` or ``CorruptDataError`` if an index cannot be read.
    """
    config = log.config
    snapshot = log.snapshot
    segments = snapshot.segments
    if config.retention_ms < 0 or not config.has_delete_policy:
        return 0
    if config.is_compacted and not cleaner_enabled:
        return 0
    if not _may_hold_future_timestamp(segments, now_ms):
        return 0
    verdicts = explain_retention(
        segments,
        config,
        now_ms=now_ms,
        log_start_offset=snapshot.log_start_offset,
        log_end_offset=snapshot.log_end_offset,
        high_watermark=snapshot.high_watermark,
    )
    return sum(1 for v in verdicts if v.reason is RetentionReason.FUTURE_TIMESTAMP)


def _may_hold_future_timestamp(segments: Sequence[LogSegment], now_ms: int) -> bool:
    """A record timestamp after now; or a non-empty segment without any, aged by its file's mtime."""
    stamps = list(map(_MAX_TIMESTAMP, segments))
    if max(stamps) > now_ms:
        return True
    if min(stamps) >= 0:
        return False
    return any(
        stamp < 0 and segment.size_bytes > 0 and segment.last_modified_ms() > now_ms
        for stamp, segment in zip(stamps, segments, strict=True)
    )

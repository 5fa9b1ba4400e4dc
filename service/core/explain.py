"""``logcleaner explain`` and ``GET /v1/retention/explain``: per partition and segment, what retention
would do and why, and whether the cleaner would pick the log. Beyond Kafka, which acts silently.

The documents use snake_case names (integers for offsets, sizes and timestamps); each segment
also carries ``detail`` (a sentence) and, when held back by a future timestamp, ``future_by_ms``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from service.core.cleanable import CleanerReason, log_to_clean
from service.core.engine_choice import EngineChoice
from service.core.retention import (
    SegmentVerdict,
    explain_log_retention,
    log_hold,
)
from service.core.stray_replicas import StrayReplica
from service.storage.log import PartitionLog
from service.storage.log_files import LOG_SUFFIX, base_offset_from_name
from service.storage.topic_partition import TopicPartition

__all__ = ["STRAY_REPLICA", "explain_partition", "explain_stray_replica"]

JsonDoc = dict[str, object]

STRAY_REPLICA = "stray-replica"  # the verdict reason of every segment of a stray replica


def explain_partition(
    log: PartitionLog,
    *,
    now_ms: int,
    cleaner_enabled: bool,
    cleaner_checkpoints: Mapping[TopicPartition, int],
    engine_choice: EngineChoice | None = None,
    is_moving: bool = False,
) -> JsonDoc:
    """``engine_choice``: the broker's engine settings (default: ``auto`` at the default threshold);
    ``is_moving``: the partition has a future replica in another dir (never cleaned meanwhile)."""
    config = log.config
    with log.lock:
        segments = log.segments
        held = log_hold(config, cleaner_enabled=cleaner_enabled, is_moving=is_moving)
        verdicts = explain_log_retention(log, segments, now_ms=now_ms, held=held)
        cleaner = _cleaner_view(
            log,
            now_ms,
            cleaner_enabled,
            cleaner_checkpoints.get(log.topic_partition),
            engine_choice or EngineChoice(),
            is_moving,
        )
    tp = log.topic_partition
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "topic_id": log.topic_id,
        "log_dir": str(log.log_dir),
        "stray": False,
        "log_start_offset": log.log_start_offset,
        "log_end_offset": log.log_end_offset,
        "high_watermark": log.high_watermark,
        "high_watermark_source": str(log.high_watermark_source),
        "last_stable_offset": log.last_stable_offset,
        "size_bytes": sum(s.size_bytes for s in segments),
        "cleanup_policy": ",".join(sorted(config.cleanup_policy)),
        "retention_ms": config.retention_ms,
        "retention_bytes": config.retention_bytes,
        "config_sources": dict(config.config_sources),
        "segments": [_segment_doc(v) for v in verdicts],
        "cleaner": cleaner,
    }


def _segment_doc(verdict: SegmentVerdict) -> JsonDoc:
    doc: JsonDoc = {
        "base_offset": verdict.base_offset,
        "size_bytes": verdict.size_bytes,
        "largest_timestamp": verdict.largest_timestamp,
        "largest_timestamp_source": verdict.largest_timestamp_source,
        "verdict": "delete" if verdict.is_delete else "keep",
        "reason": str(verdict.reason),
        "detail": verdict.detail,
    }
    if verdict.future_by_ms is not None:
        doc["future_by_ms"] = verdict.future_by_ms
    return doc


def _cleaner_view(
    log: PartitionLog,
    now_ms: int,
    cleaner_enabled: bool,
    checkpoint: int | None,
    choice: EngineChoice,
    is_moving: bool,
) -> JsonDoc:
    """``engine``: where a round would run now; it reads the clean prefix and the cleanable bytes."""
    candidate = log_to_clean(log, checkpoint, now_ms)
    engine, engine_reason = choice.choose(candidate.total_bytes)
    ratio = log.config.min_cleanable_dirty_ratio
    if log.config.configs_unknown:
        would_clean, reason = False, CleanerReason.UNKNOWN_TOPIC_CONFIG
    elif not log.config.is_compacted:
        would_clean, reason = False, CleanerReason.NOT_COMPACTED
    elif not cleaner_enabled:
        would_clean, reason = False, CleanerReason.CLEANER_DISABLED
    elif is_moving:
        would_clean, reason = False, CleanerReason.FUTURE_REPLICA
    else:
        would_clean, reason = candidate.verdict(ratio)
    return {
        "dirty_ratio": round(candidate.cleanable_ratio, 6),
        "min_cleanable_dirty_ratio": ratio,
        "first_dirty_offset": candidate.first_dirty_offset,
        "first_uncleanable_offset": candidate.first_uncleanable_offset,
        "first_uncleanable_reason": str(candidate.bounded_by),
        "cleanable_bytes": candidate.cleanable_bytes,
        "clean_bytes": candidate.clean_bytes,
        "max_compaction_delay_ms": candidate.max_compaction_delay_ms,
        "would_clean": would_clean,
        "reason": str(reason),
        "engine": engine,
        "engine_reason": str(engine_reason),
        "engine_estimates": choice.estimates(candidate.total_bytes),
    }


def explain_stray_replica(stray: StrayReplica) -> JsonDoc:
    """A stray replica: never loaded, so only its segment files' sizes; every one kept, for that reason."""
    sizes = {
        base_offset_from_name(name): os.stat(os.path.join(stray.path, name)).st_size
        for name in os.listdir(stray.path)
        if name.endswith(LOG_SUFFIX) and name[:1].isdigit()
    }
    tp = stray.topic_partition
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "topic_id": stray.topic_id,
        "log_dir": str(stray.log_dir),
        "path": str(stray.path),
        "stray": True,
        "reason": stray.reason,
        "size_bytes": sum(sizes.values()),
        "segments": [
            {"base_offset": base, "size_bytes": size, "verdict": "keep", "reason": STRAY_REPLICA}
            for base, size in sorted(sizes.items())
        ],
        "cleaner": {"would_clean": False, "reason": STRAY_REPLICA},
    }

"""The audit trail: one INFO line per action that changes a log's data, on its own logger.

Retention deletions, cleaning rounds, partitions created or deleted, DeleteRecords, producer-id expiry
and recovery at start-up each log here, in Kafka's words where Kafka has them (``UnifiedLog``'s
"Deleting segment … due to …", ``LogCleaner``'s "cleaned log … (dirty section = […])"). ``serve`` shows
this logger at INFO while every other module stays at WARNING unless ``-v``; ``-q`` hides it. The offline
commands leave it at the root's level: they print what they did on stdout already.
"""

from __future__ import annotations

import logging

__all__ = ["AUDIT_LOGGER_NAME", "audit_log", "log_ident", "segment_description"]

AUDIT_LOGGER_NAME = "logcleaner.audit"

audit_log = logging.getLogger(AUDIT_LOGGER_NAME)


def log_ident(topic_partition: object, log_dir: object) -> str:
    """Kafka's ``UnifiedLog`` line prefix, naming the partition and its log dir."""
    return f"[UnifiedLog partition={topic_partition}, dir={log_dir}]"


def segment_description(
    base_offset: int, size_bytes: int, last_modified_ms: int, largest_timestamp: int
) -> str:
    """Kafka's ``LogSegment.toString``."""
    return (
        f"LogSegment(baseOffset={base_offset}, size={size_bytes}, lastModifiedTime={last_modified_ms}, "
        f"largestRecordTimestamp={largest_timestamp})"
    )

"""``audit``: the audit trail's own logger, and Kafka's words for what it names: ``UnifiedLog``'s line
prefix (``logIdent``) and ``LogSegment.toString``, so that a line reads as a broker's would."""

from __future__ import annotations

import logging
from pathlib import Path

from service.base.audit import AUDIT_LOGGER_NAME, audit_log, log_ident, segment_description
from service.storage.topic_partition import TopicPartition


def test_the_trail_has_a_logger_of_its_own() -> None:
    assert audit_log is logging.getLogger(AUDIT_LOGGER_NAME)
    assert AUDIT_LOGGER_NAME == "logcleaner.audit", "outside the module tree: its level is set on its own"


def test_the_line_prefix_is_unified_logs() -> None:
    assert log_ident(TopicPartition("orders", 3), Path("/data/kafka")) == (
        "[UnifiedLog partition=orders-3, dir=/data/kafka]"
    )


def test_a_segment_is_described_as_kafka_describes_it() -> None:
    assert segment_description(100, 2048, 1_700_000_000_000, 1_699_999_999_000) == (
        "LogSegment(baseOffset=100, size=2048, lastModifiedTime=1700000000000, "
        "largestRecordTimestamp=1699999999000)"
    )

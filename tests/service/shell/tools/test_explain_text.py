"""``explanation_lines``: the explain document for people, from documents ``explain_partition`` builds on
real logs: a header with the offsets, retention in words and each value's source, one line per segment
(dates in UTC, the document's own sentence), and the cleaner's line with its engine, the estimates
``auto`` compared, and the remedy where there is a standard one; a stray replica is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.base.wording import utc_date
from service.core.engine_choice import EngineChoice
from service.core.explain import explain_partition
from service.shell.tools.explain_text import explanation_lines
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.records import Record
from tests.service.retention_helpers import START_MS, new_partition_log

DAY_MS = 86_400_000


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    """Three 350-byte segments of keyed batches a day old, the last one active; compacted and deleted."""
    log = new_partition_log(
        tmp_path / "orders-3", ManualClock(START_MS), policy="compact,delete", segment_bytes=350
    )
    for i in range(15):
        log.append_records([Record(0, START_MS - DAY_MS, b"%d" % (i % 3), b"%d" % (i % 10))])
    return log


def lines_of(
    log: PartitionLog,
    *,
    cleaner_enabled: bool = True,
    checkpoint: int | None = None,
    engine_choice: EngineChoice | None = None,
) -> list[str]:
    doc = explain_partition(
        log,
        now_ms=START_MS,
        cleaner_enabled=cleaner_enabled,
        cleaner_checkpoints={} if checkpoint is None else {log.topic_partition: checkpoint},
        engine_choice=engine_choice,
    )
    return explanation_lines(doc, START_MS)


def test_the_header_names_offsets_sizes_and_retention_in_words(log: PartitionLog) -> None:
    header = lines_of(log)[0]
    assert header.startswith(f"orders-3 ({log.directory.parent}): offsets [0, 15), high watermark 15 ")
    assert f"{3 * 350} bytes" in header
    assert "cleanup.policy=compact,delete" in header
    assert "retention.ms=604800000 (7d 0h)" in header and "retention.bytes=-1" in header
    assert "[" not in header.split("cleanup.policy")[1], "a config built directly names no source"


def test_each_value_names_its_source_when_the_document_has_one(tmp_path: Path) -> None:
    config = LogConfig(
        retention_ms=-1,
        config_sources=(("retention.ms", "override"), ("cleanup.policy", "metadata")),
    )
    directory = tmp_path / "t-0"
    directory.mkdir()
    log = load_partition_log(directory, config, clock=ManualClock(START_MS)).log
    header = lines_of(log)[0]
    assert "cleanup.policy=delete [metadata]" in header
    assert "retention.ms=-1 (unlimited) [override]" in header
    assert "retention.bytes=-1," not in header and header.endswith("retention.bytes=-1")


def test_one_line_a_segment_with_its_date_verdict_and_sentence(log: PartitionLog) -> None:
    lines = lines_of(log)
    segment_lines = lines[1:-1]
    assert len(segment_lines) == len(log.segments) == 3
    first = segment_lines[0]
    assert first.startswith("  segment                    0           350 B  ")
    assert f"largest ts {utc_date(START_MS - DAY_MS)} (record)" in first
    assert "KEEP   within-retention — age 1d 0h ≤ retention.ms (7d 0h)" in first
    assert str(START_MS - DAY_MS) not in "\n".join(lines), "dates, not ms since the epoch"


def test_the_cleaner_line_gives_the_remedy_for_a_ratio_at_or_below_the_minimum(log: PartitionLog) -> None:
    cleaner = lines_of(log, checkpoint=5)[-1]
    assert cleaner.startswith("  cleaner: dirty ratio 0.500 (min 0.5), dirty from 5 to 10 (active-segment): ")
    assert "would not clean (dirty-ratio-at-or-below-min-cleanable-ratio)" in cleaner
    assert cleaner.endswith(
        ". Remedy: logcleaner clean --topic orders --partition 3 cleans it now, whatever its ratio"
    )


def test_a_log_that_would_be_cleaned_has_no_remedy(log: PartitionLog) -> None:
    cleaner = lines_of(log)[-1]
    assert (
        "would clean (dirty-ratio-above-min-cleanable-ratio), on in-process (below-spark-min-bytes)"
        in cleaner
    )
    assert "Remedy" not in cleaner


def test_a_disabled_cleaner_names_its_setting(log: PartitionLog) -> None:
    cleaner = lines_of(log, cleaner_enabled=False)[-1]
    assert "would not clean (cleaner-disabled)" in cleaner
    assert cleaner.endswith(". Remedy: log.cleaner.enable=true")


def test_the_estimates_auto_compared_are_shown(log: PartitionLog) -> None:
    cleaner = lines_of(log, engine_choice=EngineChoice(cluster_cores=8))[-1]
    assert " s on the cluster, " in cleaner and " s in-process)" in cleaner


def test_a_stray_replica_is_one_line() -> None:
    doc = {
        "topic": "orders",
        "partition": 3,
        "path": "/data/orders-3",
        "stray": True,
        "size_bytes": 1050,
        "reason": "the metadata does not assign it to this broker",
    }
    assert explanation_lines(doc, START_MS) == [
        "orders-3 (/data/orders-3): STRAY REPLICA, 1050 bytes, never retained, cleaned or deleted: "
        "the metadata does not assign it to this broker"
    ]


def test_a_document_of_the_wrong_shape_is_refused(log: PartitionLog) -> None:
    doc = explain_partition(log, now_ms=START_MS, cleaner_enabled=True, cleaner_checkpoints={})
    with pytest.raises(TypeError, match="where it has an integer"):
        explanation_lines({**doc, "retention_ms": "7d"}, START_MS)
    with pytest.raises(TypeError, match="cleaner is not an object"):
        explanation_lines({**doc, "cleaner": None}, START_MS)

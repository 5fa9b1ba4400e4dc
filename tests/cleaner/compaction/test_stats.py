"""CleanerStats: Kafka's summary lines, the JSON document and merging per-group stats."""

from __future__ import annotations

from cleaner.compaction.stats import CleanerStats
from service.base.clock import ManualClock

MB = 1024 * 1024


def finished_stats() -> CleanerStats:
    clock = ManualClock(1_000_000)
    stats = CleanerStats.start(clock)
    stats.map_bytes_read = 4 * MB
    clock.advance(1_000)
    stats.map_done(clock)
    stats.bytes_read, stats.bytes_written = 10 * MB, 4 * MB
    stats.records_read, stats.records_retained = 1_000, 250
    stats.buffer_utilization = 0.125
    clock.advance(3_000)
    stats.all_done(clock)
    return stats


def test_durations_and_rates() -> None:
    stats = finished_stats()
    assert (stats.elapsed_ms, stats.map_build_ms, stats.rewrite_ms) == (4_000, 1_000, 3_000)
    assert stats.mb_per_s == 2.5


def test_summary_has_kafkas_lines() -> None:
    text = finished_stats().summary(log_name="orders-3", first_dirty_offset=10, end_offset=1_010, thread_id=1)
    assert text.splitlines() == [
        "",
        "\tLog cleaner thread 1 cleaned log orders-3 (dirty section = [10, 1010])",
        "\t10.0 MB of log processed in 4.0 seconds (2.5 MB/sec).",
        "\tIndexed 4.0 MB in 1.0 seconds (4.0 Mb/sec, 25.0% of total time)",
        "\tBuffer utilization: 12.5%",
        "\tCleaned 10.0 MB in 3.0 seconds (3.3 Mb/sec, 75.0% of total time)",
        "\tStart size: 10.0 MB (1,000 messages)",
        "\tEnd size: 4.0 MB (250 messages)",
        "\t60.0% size reduction (75.0% fewer messages)",
    ]


def test_summary_of_an_instant_empty_round_divides_by_nothing() -> None:
    clock = ManualClock()
    stats = CleanerStats.start(clock)
    stats.map_done(clock)
    stats.all_done(clock)
    assert "0.0 MB of log processed in 0.0 seconds (0.0 MB/sec)." in stats.summary(
        log_name="t-0", first_dirty_offset=0, end_offset=0
    )


def test_to_json_is_snake_case_numbers() -> None:
    doc = finished_stats().to_json()
    assert doc["bytes_read"] == 10 * MB and doc["records_retained"] == 250
    assert doc["elapsed_ms"] == 4_000 and doc["map_build_ms"] == 1_000 and doc["rewrite_ms"] == 3_000
    assert doc["started_ms"] == 1_000_000 and doc["ended_ms"] == 1_004_000
    assert all(key == key.lower() and " " not in key for key in doc)
    assert all(isinstance(value, int | float) for value in doc.values())


def test_merge_adds_counters_only() -> None:
    total = finished_stats()
    part = CleanerStats(bytes_read=5, records_read=2, invalid_records=1, groups_skipped=1, started_ms=9)
    total.merge(part)
    assert (total.bytes_read, total.records_read, total.invalid_records, total.groups_skipped) == (
        10 * MB + 5,
        1_002,
        1,
        1,
    )
    assert total.started_ms == 1_000_000

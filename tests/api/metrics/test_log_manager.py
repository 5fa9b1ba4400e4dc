"""The LogManager's figures at scrape time (``api/metrics/log_manager.py``): offline log dirs, whose
partitions stay visible with their last known values."""

from __future__ import annotations

from pathlib import Path

from service.base.clock import ManualClock
from service.storage.records import Record
from tests.api.metrics_helpers import Scrape, running_daemon, take_offline


def test_an_offline_log_dir_is_counted_and_its_partitions_stay_visible(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    clock = ManualClock()
    overrides = {"log.segment.bytes": "100", "log.retention.ms": "3600000"}
    with running_daemon([a, b], overrides, clock=clock) as daemon:
        on_a, on_b = daemon.log_manager.create_topic("orders", 2)  # one in each dir
        assert on_b.directory.parent == b.resolve()
        for log in (on_a, on_b):
            for timestamp in (clock.now_ms() + 86_400_000, clock.now_ms()):  # a segment a day ahead
                log.append_records([Record(0, timestamp, None, b"value")])
        before = Scrape.of(daemon.metrics_registry)
        take_offline(daemon, b.resolve())
        after = Scrape.of(daemon.metrics_registry)
        later = Scrape.of(daemon.metrics_registry)  # still there at the scrapes after

    assert before.value("kafka_log_logmanager_offlinelogdirectorycount") == 0
    assert after.value("kafka_log_logmanager_offlinelogdirectorycount") == 1
    assert after.value("kafka_log_logmanager_logdirectoryoffline", logDirectory=str(a.resolve())) == 0
    assert after.value("kafka_log_logmanager_logdirectoryoffline", logDirectory=str(b.resolve())) == 1
    assert set(after.series("kafka_log_logcleanermanager_uncleanable_bytes")) == {
        frozenset({("logDirectory", str(a.resolve()))})
    }
    partition_names = [
        "kafka_log_log_size",
        "kafka_log_log_numlogsegments",
        "kafka_log_log_logstartoffset",
        "kafka_log_log_logendoffset",
        "logcleaner_retention_future_timestamp_segments",
    ]
    for scrape in (after, later):
        for name in partition_names:  # the last known values, both partitions
            assert scrape.series(name) == before.series(name), name
        assert scrape.series("logcleaner_partition_offline") == {
            frozenset({("topic", "orders"), ("partition", "1")}): 1
        }
    assert before.series("logcleaner_partition_offline") == {}

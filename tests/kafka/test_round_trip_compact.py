"""Compacted topics go from a real broker through ``logcleaner clean`` and back: the broker starts on the
result without recovering a log, and serves exactly the records Kafka's rules keep. One topic per codec,
and a transactional producer whose aborted transactions the cleaner drops."""

from __future__ import annotations

import pytest

from service.storage.topic_partition import TopicPartition
from tests.kafka.checks import assert_started_cleanly
from tests.kafka.clients import Ending, create_topic, produce, read_topic
from tests.kafka.conftest import MakeBroker
from tests.kafka.round_trip import active_segment_base, differences, wait_for_cleaner_checkpoint
from tests.kafka.run_logcleaner import log_dir_options, logcleaner_json
from tests.kafka.workloads import SEGMENT_MS, kept_by_compaction, kept_by_second_clean, keyed_chunks

pytestmark = pytest.mark.kafka

CODECS = ("gzip", "snappy", "lz4", "zstd")
COMPACT = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS)}


def test_clean_compacts_what_the_broker_wrote_in_every_codec_and_the_broker_serves_the_result(
    make_broker: MakeBroker,
) -> None:
    broker = make_broker()
    before = {}
    for seed, codec in enumerate(CODECS):
        topic = f"compact-{codec}"
        create_topic(broker.bootstrap_servers, topic, config=COMPACT)
        produce(broker.bootstrap_servers, topic, keyed_chunks(seed=seed), compression=codec)
        before[topic] = read_topic(broker.bootstrap_servers, topic)
    broker.stop()

    first_uncleanable = {topic: active_segment_base(broker, topic) for topic in before}
    cleaned = logcleaner_json("clean", *log_dir_options(broker.log_dir))
    assert {entry["topic"]: entry["end_offset"] for entry in cleaned["cleaned"]} == first_uncleanable, cleaned

    broker.start()
    assert_started_cleanly(broker)
    found = {
        topic: differences(
            kept_by_compaction(records, first_uncleanable[topic]), read_topic(broker.bootstrap_servers, topic)
        )
        for topic, records in before.items()
    }
    assert not any(found.values()), found


def test_clean_drops_aborted_transactions_and_read_committed_sees_every_commit(
    make_broker: MakeBroker,
) -> None:
    broker = make_broker()
    topic = "compact-transactions"
    create_topic(broker.bootstrap_servers, topic, config=COMPACT)
    endings: tuple[Ending, ...] = (
        "commit",
        "abort",
        "commit",
        "commit",
        "abort",
        "commit",
        "abort",
        "commit",
    )
    produce(
        broker.bootstrap_servers,
        topic,
        keyed_chunks(seed=11, chunks=len(endings)),
        compression="zstd",
        transactional=endings,
    )
    everything = read_topic(broker.bootstrap_servers, topic)
    committed = read_topic(broker.bootstrap_servers, topic, isolation="read_committed")
    aborted = [r for r in everything if r not in committed]
    assert aborted and committed, "the workload must hold both committed and aborted records"
    broker.stop()

    first_uncleanable = active_segment_base(broker, topic)
    cleaned = logcleaner_json("clean", *log_dir_options(broker.log_dir))
    assert [entry["end_offset"] for entry in cleaned["cleaned"]] == [first_uncleanable], cleaned

    broker.start()
    assert_started_cleanly(broker)
    # The offset map holds committed records only; the first clean drops every aborted record below the
    # first uncleanable offset (Cleaner.buildOffsetMap, CleanedTransactionMetadata).
    kept_committed = kept_by_compaction(committed, first_uncleanable)
    kept_aborted = [r for r in aborted if r.offset >= first_uncleanable]
    after_committed = read_topic(broker.bootstrap_servers, topic, isolation="read_committed")
    after_everything = read_topic(broker.bootstrap_servers, topic)
    assert not differences(kept_committed, after_committed), differences(kept_committed, after_committed)
    expected_everything = sorted(kept_committed + kept_aborted, key=lambda r: r.offset)
    assert not differences(expected_everything, after_everything), differences(
        expected_everything, after_everything
    )


def test_a_second_clean_drops_the_tombstones_whose_delete_horizon_passed(make_broker: MakeBroker) -> None:
    """The first clean stamps a delete horizon on the batches holding tombstones; the broker appends more
    on the result; the second clean, past that horizon, drops those tombstones and keeps the new ones."""
    broker = make_broker()
    topic = "compact-horizon"
    config = {**COMPACT, "delete.retention.ms": "0"}
    create_topic(broker.bootstrap_servers, topic, config=config)
    produce(broker.bootstrap_servers, topic, keyed_chunks(seed=31, tombstone_share=0.3), compression="lz4")
    broker.stop()
    first_end = active_segment_base(broker, topic)
    logcleaner_json("clean", *log_dir_options(broker.log_dir))

    broker.start()
    assert_started_cleanly(broker)
    produce(broker.bootstrap_servers, topic, keyed_chunks(seed=32, tombstone_share=0.3), compression="lz4")
    everything = read_topic(broker.bootstrap_servers, topic)
    broker.stop()
    second_end = active_segment_base(broker, topic)
    cleaned = logcleaner_json("clean", *log_dir_options(broker.log_dir))["cleaned"]
    assert [(e["first_dirty_offset"], e["end_offset"]) for e in cleaned] == [(first_end, second_end)], cleaned

    broker.start()
    assert_started_cleanly(broker)
    expected = kept_by_second_clean(everything, first_end, second_end)
    dropped_tombstones = [
        r for r in everything if r.value is None and r.offset < first_end and r not in expected
    ]
    assert dropped_tombstones, "the workload must leave tombstones for the second clean to drop"
    found = differences(expected, read_topic(broker.bootstrap_servers, topic))
    assert not found, found


def test_the_brokers_cleaner_goes_on_from_logcleaners_checkpoint(make_broker: MakeBroker) -> None:
    """logcleaner cleans first and writes cleaner-offset-checkpoint; the broker appends, then its own
    cleaner cleans only the dirty section after that checkpoint, over logcleaner's cleaned segments, and
    serves what Kafka's rules keep."""
    broker = make_broker()
    topic = "compact-handover"
    create_topic(broker.bootstrap_servers, topic, config={**COMPACT, "delete.retention.ms": "0"})
    produce(broker.bootstrap_servers, topic, keyed_chunks(seed=41, tombstone_share=0.3), compression="zstd")
    broker.stop()
    first_end = active_segment_base(broker, topic)
    logcleaner_json("clean", *log_dir_options(broker.log_dir))

    broker.start()
    produce(broker.bootstrap_servers, topic, keyed_chunks(seed=42, tombstone_share=0.3), compression="zstd")
    everything = read_topic(broker.bootstrap_servers, topic)
    broker.stop()
    second_end = active_segment_base(broker, topic)

    broker.update_properties({"log.cleaner.min.cleanable.ratio": "0.01", "log.cleaner.backoff.ms": "100"})
    broker.start()
    assert_started_cleanly(broker)
    wait_for_cleaner_checkpoint(broker.log_dir, {TopicPartition(topic, 0): second_end})
    assert f"cleaned log {topic}-0 (dirty section = [{first_end}, {second_end}])" in broker.log_since_start()
    found = differences(
        kept_by_second_clean(everything, first_end, second_end), read_topic(broker.bootstrap_servers, topic)
    )
    assert not found, found

"""A compacted topic in each codec goes from a real broker through ``logcleaner clean`` and back: the broker
starts on the result without recovering a log, and serves exactly the records Kafka's rules keep."""

from __future__ import annotations

import pytest

from tests.kafka.checks import assert_started_cleanly, segment_base_offsets
from tests.kafka.clients import create_topic, produce, read_topic
from tests.kafka.conftest import MakeBroker
from tests.kafka.run_logcleaner import log_dir_options, logcleaner, logcleaner_json
from tests.kafka.workloads import SEGMENT_MS, kept_by_compaction, keyed_chunks

pytestmark = pytest.mark.kafka

CODECS = ("gzip", "snappy", "lz4", "zstd")


def test_clean_compacts_what_the_broker_wrote_in_every_codec_and_the_broker_serves_the_result(
    make_broker: MakeBroker,
) -> None:
    broker = make_broker()
    before = {}
    for seed, codec in enumerate(CODECS):
        topic = f"compact-{codec}"
        create_topic(
            broker.bootstrap_servers,
            topic,
            config={"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS)},
        )
        produce(broker.bootstrap_servers, topic, keyed_chunks(seed=seed), compression=codec)
        before[topic] = read_topic(broker.bootstrap_servers, topic)
    broker.stop()

    first_uncleanable = {}
    for topic in before:
        bases = segment_base_offsets(broker.log_dir / f"{topic}-0")
        assert len(bases) >= 4, f"{topic}: the broker rolled too few segments: {bases}"
        first_uncleanable[topic] = bases[-1]
        logcleaner(
            "topic-config",
            "--topic",
            topic,
            "--set",
            "cleanup.policy=compact",
            *log_dir_options(broker.log_dir),
        )
    cleaned = logcleaner_json("clean", *log_dir_options(broker.log_dir))
    ends = {entry["topic"]: entry["end_offset"] for entry in cleaned["cleaned"]}
    assert ends == first_uncleanable, cleaned

    broker.start()
    assert_started_cleanly(broker)
    differences = {}
    for topic, records in before.items():
        after = read_topic(broker.bootstrap_servers, topic)
        expected = kept_by_compaction(records, first_uncleanable[topic])
        if after != expected:
            differences[topic] = (
                len(expected),
                len(after),
                sorted(set(expected) ^ set(after), key=lambda r: r.offset)[:5],
            )
    assert not differences, differences

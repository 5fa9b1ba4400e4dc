"""``replication-offset-checkpoint`` between a real broker and logcleaner: logcleaner reads the high
watermark the broker wrote, and a broker restarted on the dir after logcleaner appended starts each
partition at the high watermark logcleaner wrote (Kafka ``Partition.createLog`` logs it), the broker's
other lines unchanged."""

from __future__ import annotations

import pytest

from service.storage.checkpoints import decode_checkpoint
from service.storage.topic_partition import TopicPartition
from tests.kafka.checks import assert_started_cleanly
from tests.kafka.clients import create_topic, produce, read_topic
from tests.kafka.conftest import MakeBroker
from tests.kafka.run_logcleaner import log_dir_options, logcleaner, logcleaner_json
from tests.kafka.workloads import keyed_chunks

pytestmark = pytest.mark.kafka

TOPIC = "hw"
APPENDED = 25
OTHER = TopicPartition("untouched", 0)  # gen does not append to it: its line stays as the broker wrote it


def test_logcleaner_reads_the_brokers_high_watermark_and_the_broker_reads_logcleaners(
    make_broker: MakeBroker,
) -> None:
    broker = make_broker()
    create_topic(broker.bootstrap_servers, TOPIC)
    create_topic(broker.bootstrap_servers, OTHER.topic)
    produce(broker.bootstrap_servers, TOPIC, keyed_chunks(seed=3, chunks=2))
    produced = len(read_topic(broker.bootstrap_servers, TOPIC))
    broker.stop()

    checkpoint = broker.log_dir / "replication-offset-checkpoint"
    written_by_kafka = decode_checkpoint(checkpoint.read_bytes())
    tp = TopicPartition(TOPIC, 0)
    [partition] = logcleaner_json("explain", "--topic", TOPIC, *log_dir_options(broker.log_dir))["partitions"]
    assert partition["high_watermark"] == written_by_kafka[tp] == partition["log_end_offset"] == produced

    logcleaner("gen", "--log-dir", str(broker.log_dir), "--topic", TOPIC, "--records", str(APPENDED))
    others = {other: offset for other, offset in written_by_kafka.items() if other != tp}
    assert OTHER in others, written_by_kafka
    assert decode_checkpoint(checkpoint.read_bytes()) == {**others, tp: produced + APPENDED}

    broker.start()
    assert_started_cleanly(broker)
    loaded = f"Log loaded for partition {TOPIC}-0 with initial high watermark {produced + APPENDED}"
    assert loaded in broker.log_since_start()
    assert len(read_topic(broker.bootstrap_servers, TOPIC)) == produced + APPENDED

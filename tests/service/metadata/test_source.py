"""``MetadataSource``: the image logcleaner's processes hold. No metadata log on a dir logcleaner made:
the broker config's values; on a broker's dir without its metadata log: the topics' configs unknown (held)
unless ``unknown.topic.configs=broker-defaults``, an override, or Kafka's internal topics cover them;
``metadata.log.ignore`` reads nothing; ``known_topics`` as Kafka's stray check needs it; a reading that
fails keeps the last image."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.errors import CorruptDataError
from service.config.broker_config import BrokerConfig
from service.metadata.log_reader import METADATA_PARTITION_DIR
from service.metadata.source import MetadataSource
from service.storage.partition_metadata import new_topic_id
from service.storage.topic_partition import TopicPartition
from tests.service.metadata.metadata_helpers import (
    broker_config,
    metadata_dir,
    partition,
    partition_change,
    topic,
    write_segment,
)

ORDERS_ID = new_topic_id()


def source_of(log_dir: Path, **props: str) -> MetadataSource:
    broker, _ = BrokerConfig.from_properties({"log.dirs": str(log_dir), **props})
    source = MetadataSource(broker)
    source.load()
    return source


def broker_dir_without_metadata(log_dir: Path, node_id: int = 1) -> None:
    """A broker's log dir (its meta.properties) whose metadata log is elsewhere or gone."""
    metadata_dir(log_dir, node_id=node_id).rmdir()


def test_a_dir_logcleaner_made_keeps_the_broker_configs(tmp_path: Path) -> None:
    source = source_of(tmp_path)
    assert source.image is None and source.node_id is None and source.known_topics() is None
    assert not source.topic_configs_unknown("orders", known_to_logcleaner=False)


def test_a_brokers_dir_without_its_metadata_log_holds_unknown_topics(tmp_path: Path) -> None:
    broker_dir_without_metadata(tmp_path)
    source = source_of(tmp_path)
    assert source.image is None and source.node_id == 1
    assert source.topic_configs_unknown("orders", known_to_logcleaner=False)
    assert not source.topic_configs_unknown("orders", known_to_logcleaner=True), "an override covers it"
    assert not source.topic_configs_unknown("__consumer_offsets", known_to_logcleaner=False), (
        "Kafka's defaults"
    )


def test_broker_defaults_can_be_chosen_for_unknown_topics(tmp_path: Path) -> None:
    broker_dir_without_metadata(tmp_path)
    source = source_of(tmp_path, **{"unknown.topic.configs": "broker-defaults"})
    assert not source.topic_configs_unknown("orders", known_to_logcleaner=False)


def test_ignoring_the_metadata_log_reads_nothing(tmp_path: Path) -> None:
    write_segment(tmp_path, [[topic("orders", ORDERS_ID)]])
    source = source_of(tmp_path, **{"metadata.log.ignore": "true"})
    assert source.image is None and source.node_id is None
    assert not source.load_if_changed()


def test_the_image_its_node_and_dynamic_configs(tmp_path: Path) -> None:
    write_segment(
        tmp_path,
        [
            [topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, (1, 2)), partition(ORDERS_ID, 1, (2, 3))],
            [broker_config("", "log.retention.ms", "1000"), broker_config("1", "log.retention.ms", "2000")],
        ],
    )
    source = source_of(tmp_path)
    assert source.node_id == 1
    image = source.image
    assert image is not None and list(image.topics) == ["orders"]
    assert source.dynamic_configs.node == {"log.retention.ms": "2000"}
    assert source.dynamic_configs.cluster == {"log.retention.ms": "1000"}


def test_known_topics_are_this_nodes_assignment_and_what_it_leads_alone(tmp_path: Path) -> None:
    write_segment(
        tmp_path,
        [
            [topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, (1,)), partition(ORDERS_ID, 1, (2, 1))],
            [partition(ORDERS_ID, 2, (2, 3))],
        ],
    )
    source = source_of(tmp_path)
    known = source.known_topics()
    assert known is not None
    assert known.topic_ids == {"orders": ORDERS_ID}
    assert set(known.assigned or ()) == {TopicPartition("orders", 0), TopicPartition("orders", 1)}
    assert set(known.led_alone) == {TopicPartition("orders", 0)}, "partition 1 is led by node 2"
    assert source.known_topics() is known, "the same image: made once"


def test_a_meta_properties_change_reads_the_whole_log_again(tmp_path: Path) -> None:
    write_segment(tmp_path, [[topic("orders", ORDERS_ID), partition(ORDERS_ID, 0, (1, 2))]])
    source = source_of(tmp_path)
    assert not source.load_if_changed(), "nothing changed: no reading"
    metadata_dir(tmp_path, node_id=2)  # the dir now belongs to node 2
    assert source.load_if_changed()
    assert source.node_id == 2


def test_a_reading_that_fails_keeps_the_last_image(tmp_path: Path) -> None:
    segment = write_segment(tmp_path, [[topic("orders", ORDERS_ID), partition(ORDERS_ID, 0)]])
    source = source_of(tmp_path)
    before = source.image
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF  # the last batch's CRC no longer matches: a whole batch, corrupt
    later = write_segment(tmp_path, [[partition_change(ORDERS_ID, 0, [3])]], base_offset=2)
    segment.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError) as info:
        source.load_if_changed()
    assert str(tmp_path / METADATA_PARTITION_DIR) in str(info.value.path)
    assert source.image is before
    later.unlink()
    segment.write_bytes(bytes(data[:-1]) + bytes([data[-1] ^ 0xFF]))
    assert source.load_if_changed() and source.image is not before, "readable again: read again"

"""``MetadataImageBuilder``: the replay rules of a broker's ``MetadataDelta`` that the whole-log reading
tests (``test_log_reader``) do not reach: leadership (``PartitionChangeRecord``'s leader -2 and null ISR
leave them as they were), a transaction carried across ``build`` (KIP-868), ``build`` sharing the topics
nothing touched since, which offsets count towards ``end_offset``, and the config resources kept."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from service.base.errors import CorruptDataError
from service.metadata.image import MetadataImageBuilder, PartitionLeadership
from service.metadata.log_reader import MetadataEntry
from service.metadata.records import (
    ABORT_TRANSACTION_RECORD_KEY,
    BEGIN_TRANSACTION_RECORD_KEY,
    CONFIG_RECORD_KEY,
    END_TRANSACTION_RECORD_KEY,
    PARTITION_CHANGE_RECORD_KEY,
    PARTITION_RECORD_KEY,
    REMOVE_TOPIC_RECORD_KEY,
    TOPIC_RECORD_KEY,
    MetadataRecord,
)

ORDERS, AUDIT = "orders-id", "audit-id"


class Log:
    """Metadata records at consecutive offsets, as entries a reading yields."""

    def __init__(self, builder: MetadataImageBuilder, first_offset: int = 0) -> None:
        self.builder = builder
        self.offset = first_offset

    def add(
        self, api_key: int, fields: dict[str, object] | None = None, *, in_snapshot: bool = False
    ) -> None:
        record = MetadataRecord(api_key, 0, f"Record{api_key}", {} if fields is None else fields)
        self.builder.replay(MetadataEntry(self.offset, record, "/m/00000000000000000000.log", 0, in_snapshot))
        self.offset += 1

    def topic(self, name: str, topic_id: str) -> None:
        self.add(TOPIC_RECORD_KEY, {"name": name, "topic_id": topic_id})

    def partition(
        self, topic_id: str, number: int, replicas: Iterable[int], leader: int, isr: Iterable[int]
    ) -> None:
        self.add(
            PARTITION_RECORD_KEY,
            {
                "topic_id": topic_id,
                "partition_id": number,
                "replicas": list(replicas),
                "leader": leader,
                "isr": list(isr),
            },
        )

    def change(
        self,
        topic_id: str,
        number: int,
        *,
        replicas: list[int] | None = None,
        leader: int = -2,
        isr: list[int] | None = None,
    ) -> None:
        self.add(
            PARTITION_CHANGE_RECORD_KEY,
            {
                "topic_id": topic_id,
                "partition_id": number,
                "replicas": replicas,
                "leader": leader,
                "isr": isr,
            },
        )

    def config(self, resource_type: int, resource: str, name: str, value: str | None) -> None:
        self.add(
            CONFIG_RECORD_KEY,
            {"resource_type": resource_type, "resource_name": resource, "name": name, "value": value},
        )


@pytest.fixture
def log() -> Log:
    log = Log(MetadataImageBuilder())
    log.topic("orders", ORDERS)
    log.partition(ORDERS, 0, [1, 2, 3], leader=1, isr=[1, 2, 3])
    return log


def leadership(log: Log, partition: int = 0) -> PartitionLeadership:
    return log.builder.build().topics["orders"].leadership[partition]


def test_a_partition_record_sets_replicas_leader_and_isr(log: Log) -> None:
    image = log.builder.build()
    assert image.topics["orders"].partitions == {0: (1, 2, 3)}
    assert leadership(log) == PartitionLeadership(1, (1, 2, 3))


def test_a_partition_change_leaves_what_it_does_not_name(log: Log) -> None:
    """Kafka's ``PartitionChangeRecord``: leader -2 (``NO_LEADER_CHANGE``) keeps the leader, a null ISR
    keeps the ISR, null replicas keep the replicas."""
    log.change(ORDERS, 0, isr=[1])
    assert leadership(log) == PartitionLeadership(1, (1,))
    log.change(ORDERS, 0, leader=3)
    assert leadership(log) == PartitionLeadership(3, (1,))
    log.change(ORDERS, 0, leader=-1)  # -1 is a leader value: none
    assert leadership(log) == PartitionLeadership(-1, (1,))
    assert log.builder.build().topics["orders"].partitions == {0: (1, 2, 3)}
    log.change(ORDERS, 0, replicas=[4, 5])
    assert log.builder.build().topics["orders"].partitions == {0: (4, 5)}


@pytest.mark.parametrize(
    ("leader", "isr", "alone"),
    [(1, (1,), True), (1, (1, 2), False), (2, (1,), False), (-1, (), False)],
)
def test_led_alone_means_leader_and_the_only_in_sync_replica(
    leader: int, isr: tuple[int, ...], alone: bool
) -> None:
    """Only then is the leader's log end its high watermark (Kafka ``maybeIncrementLeaderHW``)."""
    assert PartitionLeadership(leader, isr).is_led_alone_by(1) is alone


def test_a_transaction_open_at_build_applies_at_its_end(log: Log) -> None:
    """KIP-868: a transaction's records apply at its EndTransactionRecord; an image built meanwhile
    leaves them out, and the builder carries them on."""
    log.add(BEGIN_TRANSACTION_RECORD_KEY)
    log.topic("audit", AUDIT)
    log.config(2, "audit", "cleanup.policy", "compact")
    during = log.builder.build()
    assert "audit" not in during.topics and "audit" not in during.topic_configs
    assert during.end_offset == log.offset, "the log is read to here, even if not applied"
    log.add(END_TRANSACTION_RECORD_KEY)
    after = log.builder.build()
    assert after.topics["audit"].topic_id == AUDIT
    assert after.topic_configs["audit"] == {"cleanup.policy": "compact"}


def test_an_aborted_transaction_changes_nothing(log: Log) -> None:
    log.add(BEGIN_TRANSACTION_RECORD_KEY)
    log.add(REMOVE_TOPIC_RECORD_KEY, {"topic_id": ORDERS})
    log.add(ABORT_TRANSACTION_RECORD_KEY)
    log.topic("audit", AUDIT)  # after the abort: applies at once
    image = log.builder.build()
    assert sorted(image.topics) == ["audit", "orders"]


def test_build_shares_the_topics_nothing_touched(log: Log) -> None:
    log.topic("audit", AUDIT)
    first = log.builder.build()
    log.change(ORDERS, 0, isr=[1])
    second = log.builder.build()
    assert second.topics["audit"] is first.topics["audit"], "untouched: the same object"
    assert second.topics["orders"] is not first.topics["orders"]
    assert first.topics["orders"].leadership[0].isr == (1, 2, 3), "an image built before does not change"
    assert list(second.topics) == ["audit", "orders"], "by name"


def test_snapshot_entries_do_not_move_the_end_offset() -> None:
    """A snapshot's records count their own offsets; the log stands at the snapshot's end offset."""
    log = Log(MetadataImageBuilder(end_offset=500))
    log.topic("orders", ORDERS)
    log.add(TOPIC_RECORD_KEY, {"name": "audit", "topic_id": AUDIT}, in_snapshot=True)
    assert log.builder.build().end_offset == 500
    later = Log(log.builder, first_offset=500)
    later.topic("x", "x-id")
    assert log.builder.build().end_offset == 501


def test_removing_a_topic_drops_its_configs_and_remembers_its_name(log: Log) -> None:
    log.config(2, "orders", "retention.ms", "5")
    log.add(REMOVE_TOPIC_RECORD_KEY, {"topic_id": ORDERS})
    image = log.builder.build()
    assert "orders" not in image.topics and "orders" not in image.topic_configs
    assert image.removed_topics == {"orders": ORDERS}
    log.topic("orders", "orders-id-2")
    image = log.builder.build()
    assert image.removed_topics == {} and image.topics["orders"].partitions == {}, "a new incarnation"


def test_records_naming_the_old_incarnation_are_corrupt(log: Log) -> None:
    log.topic("orders", "orders-id-2")  # created again without a RemoveTopicRecord seen
    with pytest.raises(CorruptDataError, match="names topic id orders-id, which no TopicRecord"):
        log.change(ORDERS, 0, isr=[1])


def test_only_topic_and_broker_configs_are_kept(log: Log) -> None:
    log.config(2, "orders", "retention.ms", "5")
    log.config(4, "", "log.retention.ms", "1000")
    log.config(4, "1", "log.retention.ms", "2000")
    log.config(4, "2", "log.retention.ms", "3000")
    log.config(16, "metrics", "interval.ms", "100")  # client metrics: not used
    log.config(4, "2", "log.retention.ms", None)  # emptied: gone from the image
    image = log.builder.build()
    assert image.topic_configs == {"orders": {"retention.ms": "5"}}
    assert image.broker_configs == {"": {"log.retention.ms": "1000"}, "1": {"log.retention.ms": "2000"}}
    assert image.dynamic_configs(1).node == {"log.retention.ms": "2000"}
    assert image.dynamic_configs(1).cluster == {"log.retention.ms": "1000"}
    assert image.dynamic_configs(None).node == {}, "without a node id: the cluster default only"


def test_records_of_kinds_it_does_not_know_change_nothing(log: Log) -> None:
    before = log.builder.build()
    record = MetadataRecord(999, 0, "UnknownRecord(api key 999)", None)
    log.builder.replay(MetadataEntry(log.offset, record, "/m/0.log", 0))
    after = log.builder.build()
    assert after.topics == before.topics and after.end_offset == before.end_offset + 1

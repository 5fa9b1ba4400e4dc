"""The broker's clients, through confluent-kafka (librdkafka): create topics, produce records with chosen
timestamps (a topic with ``segment.ms`` rolls a segment wherever the tests say), and read every record of
a topic back as Kafka serves it."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # the typed home of the class confluent_kafka.admin re-exports

__all__ = [
    "ConsumedRecord",
    "Ending",
    "ProducedRecord",
    "commit_rounds",
    "committed_offsets",
    "create_topic",
    "low_watermarks",
    "produce",
    "read_topic",
]

Ending = Literal["commit", "abort"]
Headers = tuple[tuple[str, bytes | None], ...]
QUIET = {"log_level": 0}  # librdkafka prints each reconnect to stderr; the broker's own log is what counts
TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class ProducedRecord:
    """One record to produce; ``value=None`` is a tombstone."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    partition: int = 0
    headers: Headers = ()


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """One record as a consumer received it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: Headers = field(default=())


def create_topic(
    bootstrap_servers: str, name: str, *, partitions: int = 1, config: Mapping[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **QUIET})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=dict(config or {}))])
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)


def produce(
    bootstrap_servers: str,
    topic: str,
    chunks: Iterable[Sequence[ProducedRecord]],
    *,
    compression: str = "none",
    transactional: Sequence[Ending] | None = None,
    config: Mapping[str, str | int] | None = None,
) -> None:
    """Produce each chunk and flush it before the next, so no batch spans two chunks. ``transactional``
    wraps chunk i in a transaction that ends as its i-th entry says."""
    settings: dict[str, str | int] = {
        "bootstrap.servers": bootstrap_servers,
        "compression.type": compression,
        "linger.ms": 5,
        **QUIET,
        **(config or {}),
    }
    if transactional is not None:
        settings.setdefault("transactional.id", f"{topic}-producer")
    producer = Producer(settings)
    failures: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error)

    if transactional is not None:
        producer.init_transactions(TIMEOUT_S)
    for index, chunk in enumerate(chunks):
        if transactional is not None:
            producer.begin_transaction()
        for record in chunk:
            producer.produce(
                topic,
                key=record.key,
                value=record.value,
                partition=record.partition,
                timestamp=record.timestamp_ms,
                headers=list(record.headers),
                on_delivery=on_delivery,
            )
        if transactional is None:
            if producer.flush(TIMEOUT_S) != 0:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{topic}: records left unsent"))
        else:
            producer.flush(TIMEOUT_S)
            if transactional[index] == "commit":
                producer.commit_transaction(TIMEOUT_S)
            else:
                producer.abort_transaction(TIMEOUT_S)
    if failures:
        raise KafkaException(failures[0])


def read_topic(
    bootstrap_servers: str,
    topic: str,
    partitions: int = 1,
    *,
    isolation: Literal["read_committed", "read_uncommitted"] = "read_uncommitted",
) -> list[ConsumedRecord]:
    """Every record of ``topic`` from its log start offset to its end (the last stable offset under
    read_committed), in partition then offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"reader-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            **QUIET,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()
        records: list[ConsumedRecord] = []
        while len(at_end) < partitions:
            message = consumer.poll(TIMEOUT_S)
            if message is None:
                raise TimeoutError(f"{topic}: no record or end of partition within {TIMEOUT_S} s")
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition() or 0)
                    continue
                raise KafkaException(error)
            records.append(_consumed(message))
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def _consumed(message: Message) -> ConsumedRecord:
    _kind, timestamp = message.timestamp()
    return ConsumedRecord(
        partition=message.partition() or 0,
        offset=message.offset() or 0,
        key=message.key(),
        value=message.value(),
        timestamp_ms=timestamp,
        headers=_headers(message),
    )


def _headers(message: Message) -> Headers:
    raw = message.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    return tuple((k, v.encode() if isinstance(v, str) else v) for k, v in pairs)


def low_watermarks(bootstrap_servers: str, topic: str, partitions: int = 1) -> list[int]:
    """Each partition's log start offset as the broker reports it (ListOffsets, earliest)."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"watermarks-{topic}", **QUIET})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)[0]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


def commit_rounds(
    bootstrap_servers: str, group: str, topic: str, partitions: int, rounds: int, pause_ms: int
) -> None:
    """``rounds`` commits of every partition's offset (round r commits ``10 * r + p + 1`` for partition p),
    ``pause_ms`` apart, by a consumer outside any rebalance (a simple group, as a Kafka Connect sink or a
    stream processor that assigns its own partitions uses)."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group, **QUIET})
    try:
        for round_ in range(rounds):
            offsets = [TopicPartition(topic, p, 10 * round_ + p + 1) for p in range(partitions)]
            consumer.commit(offsets=offsets, asynchronous=False)
            time.sleep(pause_ms / 1000)
    finally:
        consumer.close()


def committed_offsets(bootstrap_servers: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (OffsetFetch), read from ``__consumer_offsets``."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group, **QUIET})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=TIMEOUT_S)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()

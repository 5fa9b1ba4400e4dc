"""Fixtures of the tests that run a real Apache Kafka broker (marker ``kafka``): the release's jars, fetched
once per machine, and brokers that are always stopped, passed or failed."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from tests.kafka.broker import KafkaBroker
from tests.kafka.distribution import KafkaDistribution, load_distribution

MakeBroker = Callable[..., KafkaBroker]


@pytest.fixture(scope="session")
def kafka_distribution() -> KafkaDistribution:
    return load_distribution()


@pytest.fixture
def make_broker(kafka_distribution: KafkaDistribution, tmp_path: Path) -> Iterator[MakeBroker]:
    """A factory of freshly formatted brokers, each under its own dir and started unless ``start`` is
    false; every one is stopped when the test ends."""
    made: list[KafkaBroker] = []

    def make(properties: Mapping[str, str] | None = None, *, start: bool = True) -> KafkaBroker:
        broker = KafkaBroker(kafka_distribution, tmp_path / f"broker-{len(made)}", properties)
        made.append(broker)
        broker.format()
        if start:
            broker.start()
        return broker

    yield make
    for broker in made:
        broker.stop(check=False)

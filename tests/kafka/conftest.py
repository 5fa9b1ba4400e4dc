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


def _broker_factory(distribution: KafkaDistribution, base: Path) -> tuple[MakeBroker, list[KafkaBroker]]:
    made: list[KafkaBroker] = []

    def make(properties: Mapping[str, str] | None = None, *, start: bool = True) -> KafkaBroker:
        """A freshly formatted broker under its own dir, started unless ``start`` is false."""
        broker = KafkaBroker(distribution, base / f"broker-{len(made)}", properties)
        made.append(broker)
        broker.format()
        if start:
            broker.start()
        return broker

    return make, made


@pytest.fixture
def make_broker(kafka_distribution: KafkaDistribution, tmp_path: Path) -> Iterator[MakeBroker]:
    make, made = _broker_factory(kafka_distribution, tmp_path)
    yield make
    for broker in made:
        broker.stop(check=False)


@pytest.fixture(scope="module")
def make_module_broker(
    kafka_distribution: KafkaDistribution, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MakeBroker]:
    """As ``make_broker``, for a broker that a module's tests share."""
    make, made = _broker_factory(kafka_distribution, tmp_path_factory.mktemp("kafka"))
    yield make
    for broker in made:
        broker.stop(check=False)

"""``KAFKA_BROKER_KEYS`` holds every broker config name of the Kafka release under test, as its own
``KafkaConfig.configNames`` lists them (asked of the release's jars)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from service.config.kafka_broker_keys import KAFKA_BROKER_KEYS
from tests.kafka.distribution import KafkaDistribution

pytestmark = pytest.mark.kafka

NAMES_JAVA = """
public class Names {
    public static void main(String[] args) throws Exception {
        Class<?> c = Class.forName("kafka.server.KafkaConfig$");
        Object names = c.getMethod("configNames").invoke(c.getField("MODULE$").get(null));
        if (names instanceof java.util.Collection) {
            for (Object o : (java.util.Collection<?>) names) System.out.println(o);
        } else {
            scala.collection.Iterator<?> it = ((scala.collection.Iterable<?>) names).iterator();
            while (it.hasNext()) System.out.println(it.next());
        }
    }
}
"""


def test_every_broker_config_of_the_release_is_known(
    kafka_distribution: KafkaDistribution, tmp_path: Path
) -> None:
    source = tmp_path / "Names.java"
    source.write_text(NAMES_JAVA)
    done = subprocess.run(
        ["java", "-cp", kafka_distribution.classpath, str(source)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    names = {line.strip() for line in done.stdout.splitlines() if line.strip()}
    assert len(names) > 300, done.stdout
    assert names <= KAFKA_BROKER_KEYS, sorted(names - KAFKA_BROKER_KEYS)

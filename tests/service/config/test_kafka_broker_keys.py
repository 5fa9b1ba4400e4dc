"""A broker's own ``server.properties`` is read quietly: Kafka's keys that logcleaner does not use are listed,
not warned about; only a key neither knows is warned about, with the closest of either as a suggestion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.config.broker_config import BrokerConfig
from service.shell.cli import main

KRAFT_BROKER = {  # what a Kafka 4.x quick-start server.properties sets, beside log.dirs
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@localhost:9093",
    "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
    "inter.broker.listener.name": "PLAINTEXT",
    "advertised.listeners": "PLAINTEXT://localhost:9092",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "listener.name.plaintext.ssl.keystore.type": "PKCS12",
    "num.network.threads": "3",
    "socket.send.buffer.bytes": "102400",
    "offsets.topic.replication.factor": "1",
    "log.retention.hours": "168",
}


def test_kafkas_own_keys_are_listed_not_warned_about() -> None:
    broker, warnings = BrokerConfig.from_properties(KRAFT_BROKER)
    assert warnings == []
    assert (
        "listeners" in broker.ignored_broker_keys and "log.retention.hours" not in broker.ignored_broker_keys
    )
    assert "listener.name.plaintext.ssl.keystore.type" in broker.ignored_broker_keys


@pytest.mark.parametrize(
    ("key", "suggestion"), [("listners", "listeners"), ("log.retention.hourz", "log.retention.hours")]
)
def test_a_key_neither_knows_is_warned_about_with_the_closest_of_either(key: str, suggestion: str) -> None:
    _, warnings = BrokerConfig.from_properties({**KRAFT_BROKER, key: "1"})
    assert warnings == [f"unknown config key {key!r} ignored: did you mean {suggestion}?"]


def test_explain_json_lists_the_ignored_keys(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in KRAFT_BROKER.items()) + f"log.dirs={tmp_path}\n")
    assert main(["explain", "--json", "--config", str(config)]) == 0
    out, err = capsys.readouterr()
    assert "unknown config key" not in err
    document = json.loads(out)
    assert "process.roles" in document["ignored_broker_keys"] and document["partitions"] == []

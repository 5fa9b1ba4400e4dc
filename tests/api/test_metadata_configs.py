"""A topic's configs over HTTP when the broker's metadata log sets them: ``GET /v1/topics/{t}`` names each
value's source, ``/configs`` keeps the contract's three (a metadata value is a topic-level one)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from service.storage.partition_metadata import new_topic_id, write_partition_metadata
from tests.api.conftest import serve_daemon
from tests.service.cli_logs import make_logs
from tests.service.metadata.metadata_helpers import (
    broker_config,
    partition,
    topic,
    topic_config,
    write_segment,
)


def test_topic_detail_and_configs_show_the_metadata_logs_values(tmp_path: Path) -> None:
    make_logs(tmp_path, age_ms=0, count=2)
    t_id = new_topic_id()
    write_partition_metadata(tmp_path / "t-0", t_id)
    write_segment(
        tmp_path,
        [
            [topic("t", t_id), topic_config("t", "cleanup.policy", "compact"), partition(t_id, 0)],
            [broker_config("1", "log.retention.bytes", "4096")],
        ],
    )
    with serve_daemon(tmp_path) as served:
        detail = served.client.get("/v1/topics/t").json()
        effective = {c["name"]: c for c in detail["effective_configs"]}
        assert effective["cleanup.policy"] == {
            "name": "cleanup.policy",
            "value": "compact",
            "source": "metadata",
        }
        assert effective["retention.bytes"] == {
            "name": "retention.bytes",
            "value": 4096,
            "source": "broker-dynamic",
        }
        assert effective["segment.bytes"]["source"] == "default"
        assert detail["configs"] == {}, "the overrides logcleaner keeps: none"

        configs = {c["name"]: c for c in served.client.get("/v1/topics/t/configs").json()["configs"]}
        assert configs["cleanup.policy"]["source"] == "metadata"
        assert configs["retention.bytes"]["source"] == "broker-dynamic"
        served.client.patch("/v1/topics/t/configs", json={"set": {"cleanup.policy": "delete"}})
        detail = served.client.get("/v1/topics/t").json()
        effective = {c["name"]: c for c in detail["effective_configs"]}
        assert effective["cleanup.policy"] == {
            "name": "cleanup.policy",
            "value": "delete",
            "source": "override",
        }


def test_a_topic_created_through_the_api_is_named_as_unknown_to_the_metadata(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_segment(tmp_path, [[topic("t", new_topic_id())]])
    with serve_daemon(tmp_path) as served, caplog.at_level(logging.WARNING, logger="api.routes.topics"):
        created = served.client.post("/v1/topics", json={"name": "fresh", "partitions": 1})
        assert created.status_code == 201, created.text
    assert any("fresh" in r.getMessage() and "stray replicas" in r.getMessage() for r in caplog.records)

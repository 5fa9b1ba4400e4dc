"""``gen --metadata-log``: the generated topics in a KRaft metadata log, their ids those of their
``partition.metadata``, their configs as ConfigRecords that logcleaner then applies with source metadata."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.cli import main
from service.config.broker_config import BrokerConfig
from service.config.topic_store import TopicConfigStore
from service.metadata.source import MetadataSource
from service.storage.partition_metadata import read_partition_metadata


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def image_of(log_dir: Path) -> MetadataSource:
    broker, _ = BrokerConfig.from_properties({"log.dirs": str(log_dir)})
    source = MetadataSource(broker)
    source.load()
    return source


def test_generated_topics_are_recorded_with_their_ids_partitions_and_configs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    gen = ["gen", "--log-dir", str(tmp_path), "--records", "20", "--metadata-log"]
    code, _, err = run(capsys, *gen, "--topic", "orders", "--partitions", "2", "--cleanup-policy", "compact")
    assert code == 0, err
    source = image_of(tmp_path)
    image = source.image
    assert image is not None and source.node_id == 1
    orders = image.topics["orders"]
    on_disk = read_partition_metadata(tmp_path / "orders-1")
    assert on_disk is not None and orders.topic_id == on_disk.topic_id
    assert orders.partitions == {0: (1,), 1: (1,)}
    assert image.topic_configs == {"orders": {"cleanup.policy": "compact"}}
    assert TopicConfigStore([tmp_path]).get("orders") == {}, "the configs are the metadata's, not overrides"

    code, out, err = run(capsys, "explain", "--json", "--override", f"log.dirs={tmp_path}")
    assert code == 0, err
    for doc in json.loads(out)["partitions"]:
        assert doc["cleanup_policy"] == "compact" and doc["config_sources"]["cleanup.policy"] == "metadata"

    # A second run appends: one more partition, another topic; nothing recorded twice.
    code, _, err = run(capsys, *gen, "--topic", "orders", "--partitions", "3", "--cleanup-policy", "compact")
    assert code == 0, err
    code, _, err = run(capsys, *gen, "--topic", "audit")
    assert code == 0, err
    image = image_of(tmp_path).image
    assert image is not None
    assert image.topics["orders"].partitions == {0: (1,), 1: (1,), 2: (1,)}
    assert set(image.topics) == {"orders", "audit"}
    segment = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    code, out, err = run(capsys, "dump", "--cluster-metadata-decoder", "--json", str(segment))
    kinds = [
        r["decoded"]["value"]["kind"] for b in json.loads(out)["files"][0]["batches"] for r in b["records"]
    ]
    assert kinds.count("TopicRecord") == 2 and kinds.count("PartitionRecord") == 4
    assert kinds.count("ConfigRecord") == 1


def test_the_coordinator_workloads_refuse_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(
        capsys, "gen", "--log-dir", str(tmp_path), "--workload", "consumer-offsets", "--metadata-log"
    )
    assert code == 2 and "--metadata-log" in err

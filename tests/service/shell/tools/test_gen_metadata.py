"""``gen --metadata-log``: the generated topics in a KRaft metadata log, their ids those of their
``partition.metadata``, their configs as ConfigRecords that logcleaner then applies with source metadata."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from service.config.broker_config import BrokerConfig
from service.config.topic_store import TopicConfigStore
from service.metadata.source import MetadataSource
from service.shell.cli import main
from service.storage.partition_metadata import new_topic_id, read_partition_metadata
from tests.paths import FIXTURES
from tests.service.metadata.metadata_helpers import metadata_dir, topic, write_segment, write_snapshot


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


def test_records_go_after_a_brokers_last_offset(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """After Kafka's own segment and one more: in the last segment, offsets following on."""
    metadata = metadata_dir(tmp_path)
    shutil.copyfile(FIXTURES / "kraft-metadata-a.log", metadata / "00000000000000000000.log")  # offsets 0-3
    write_segment(tmp_path, [[topic("other", new_topic_id())]], base_offset=4)
    code, _, err = run(
        capsys, "gen", "--log-dir", str(tmp_path), "--records", "5", "--topic", "orders", "--metadata-log"
    )
    assert code == 0, err
    assert sorted(p.name for p in metadata.glob("*.log")) == [
        "00000000000000000000.log",
        "00000000000000000004.log",
    ]
    offsets = [
        r["offset"]
        for b in json.loads(
            run(capsys, "dump", "--records", "--json", str(metadata / "00000000000000000004.log"))[1]
        )["files"][0]["batches"]
        for r in b["records"]
    ]
    assert offsets == [4, 5, 6]  # the other topic, then orders' TopicRecord and PartitionRecord
    image = image_of(tmp_path).image
    assert image is not None and {"saz", "other", "orders"} <= set(image.topics)


def test_records_after_a_snapshot_past_the_segments_start_a_new_segment(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_snapshot(tmp_path, [topic("other", new_topic_id())], end_offset=20)
    code, _, err = run(
        capsys, "gen", "--log-dir", str(tmp_path), "--records", "5", "--topic", "orders", "--metadata-log"
    )
    assert code == 0, err
    assert [p.name for p in (tmp_path / "__cluster_metadata-0").glob("*.log")] == ["00000000000000000020.log"]
    image = image_of(tmp_path).image
    assert image is not None and set(image.topics) == {"other", "orders"} and image.end_offset == 22

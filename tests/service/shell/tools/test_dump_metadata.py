"""``dump --cluster-metadata-decoder``: KRaft metadata records by kind and fields, in segments (Kafka's own
included) and in ``.checkpoint`` snapshots."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from service.metadata.log_writer import MetadataRecordSpec
from service.shell.cli import main
from service.storage.partition_metadata import new_topic_id
from service.storage.records import Record, encode_batch
from tests.paths import FIXTURES
from tests.service.metadata.metadata_helpers import (
    partition,
    topic,
    topic_config,
    write_segment,
    write_snapshot,
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["dump", *args])
    out, err = capsys.readouterr()
    return code, out, err


def decoded_values(document: dict[str, Any]) -> list[dict[str, Any]]:
    (file,) = document["files"]
    return [r["decoded"]["value"] for b in file["batches"] for r in b.get("records", []) if "decoded" in r]


def test_a_segment_is_decoded_by_kind_and_fields(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    topic_id = new_topic_id()
    segment = write_segment(
        tmp_path, [[topic("orders", topic_id), topic_config("orders", "cleanup.policy", "compact")]]
    )
    code, out, err = run(capsys, "--cluster-metadata-decoder", "--json", str(segment))
    assert code == 0, err
    values = decoded_values(json.loads(out))
    assert values == [
        {"kind": "TopicRecord", "api_key": 2, "version": 0, "name": "orders", "topic_id": topic_id},
        {
            "kind": "ConfigRecord",
            "api_key": 4,
            "version": 0,
            "resource_type": 2,
            "resource_name": "orders",
            "name": "cleanup.policy",
            "value": "compact",
        },
    ]
    code, out, err = run(capsys, "--cluster-metadata-decoder", str(segment))
    assert code == 0, err
    assert '"kind": "TopicRecord"' in out and '"name": "orders"' in out


def test_a_snapshot_is_dumped_with_its_header_and_footer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    topic_id = new_topic_id()
    snapshot = write_snapshot(tmp_path, [topic("orders", topic_id), partition(topic_id, 0)], end_offset=2)
    code, out, err = run(capsys, "--cluster-metadata-decoder", "--json", str(snapshot))
    assert code == 0, err
    document = json.loads(out)
    (file,) = document["files"]
    assert file["kind"] == "metadata_snapshot"
    controls = [r["control_type"] for b in file["batches"] if b["is_control"] for r in b["records"]]
    assert controls == ["SNAPSHOT_HEADER", "SNAPSHOT_FOOTER"]
    assert [v["kind"] for v in decoded_values(document)] == ["TopicRecord", "PartitionRecord"]


def test_kafkas_own_metadata_segment_decodes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    segment = tmp_path / "00000000000000000000.log"
    shutil.copyfile(FIXTURES / "kraft-metadata-a.log", segment)
    code, out, err = run(capsys, "--cluster-metadata-decoder", "--json", str(segment))
    assert code == 0, err
    values = decoded_values(json.loads(out))
    assert [v["kind"] for v in values] == [
        "FeatureLevelRecord",
        "TopicRecord",
        "PartitionRecord",
        "PartitionRecord",
    ]
    assert values[0] == {
        "kind": "FeatureLevelRecord",
        "api_key": 12,
        "version": 0,
        "name": "metadata.version",
        "feature_level": 20,
    }
    assert values[2]["replicas"] == [1] and values[2]["version"] == 1


def test_bytes_that_are_no_metadata_record_are_shown_raw(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(encode_batch([Record(0, 1, None, b"hello")]))
    code, out, err = run(capsys, "--cluster-metadata-decoder", "--json", str(segment))
    assert code == 0, err
    (value,) = decoded_values(json.loads(out))
    assert "frame version 104" in value["note"]
    assert value["raw"] == {"type": "BINARY", "data": "aGVsbG8="}


def test_a_clear_elr_record_is_dumped_with_its_topic(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 47: a 4.3 broker writes one when its transaction coordinator creates ``__transaction_state``."""
    clear_elr = MetadataRecordSpec(28, 0, {"topic_name": "__transaction_state"})
    segment = write_segment(tmp_path, [[clear_elr]])
    code, out, err = run(capsys, "--cluster-metadata-decoder", "--json", str(segment))
    assert code == 0, err
    assert decoded_values(json.loads(out)) == [
        {"kind": "ClearElrRecord", "api_key": 28, "version": 0, "topic_name": "__transaction_state"}
    ]
    code, out, err = run(capsys, "--cluster-metadata-decoder", str(segment))
    assert code == 0, err
    assert '"kind": "ClearElrRecord"' in out and "UnknownRecord" not in out

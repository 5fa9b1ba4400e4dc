"""Topics whose configs are unknown (a broker's dir without its metadata log), held until they are known.

A ZooKeeper-era broker keeps topic configs in ZooKeeper, not in ``log.dirs``; a KRaft broker's copy whose
``metadata.log.dir`` is elsewhere and not given has none either. Taking the broker's defaults for such a
topic would delete a compacted changelog by time: its retention and cleaning wait until logcleaner knows
its configs (``topic-config --import``, an override) or the operator says
``unknown.topic.configs=broker-defaults``.
A dir logcleaner made itself, and Kafka's internal topics (their creation defaults), are not held.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from service.shell.cli import main
from tests.service.high_watermark_helpers import make_broker_dir

KRAFT_META = "version=1\ncluster.id=Some4ClusterId5Here6789\nnode.id=1\ndirectory.id=3fNQ6pvRSGGDTeXOZeMULw\n"
DESCRIBED = (
    "All configs for topic t are:\n"
    "  cleanup.policy={policy} sensitive=false synonyms={{{source}:cleanup.policy={policy}, "
    "DEFAULT_CONFIG:log.cleanup.policy=delete}}\n"
)


def run(capsys: pytest.CaptureFixture[str], log_dir: Path, *args: str) -> tuple[int, str, str]:
    code = main([*args, "--override", f"log.dirs={log_dir}", "--override", "log.retention.hours=24"])
    out, err = capsys.readouterr()
    return code, out, err


def deleted_by_retention(capsys: pytest.CaptureFixture[str], log_dir: Path, *extra: str) -> list[int]:
    code, out, err = run(capsys, log_dir, "retention", "--dry-run", "--json", *extra)
    assert code == 0, err
    return [d["base_offset"] for d in json.loads(out)["deleted"]]


def explain_t0(capsys: pytest.CaptureFixture[str], log_dir: Path) -> dict[str, object]:
    code, out, err = run(capsys, log_dir, "explain", "--json")
    assert code == 0, err
    [partition] = json.loads(out)["partitions"]
    assert isinstance(partition, dict)
    return partition


@pytest.mark.parametrize("meta", ["version=0\nbroker.id=0\n", KRAFT_META], ids=["zookeeper", "kraft"])
def test_a_brokers_topic_without_metadata_is_held_and_explained(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, tmp_path: Path, meta: str
) -> None:
    log_dir = make_broker_dir(tmp_path / "logs", "t")
    (log_dir / "meta.properties").write_text(meta)
    with caplog.at_level(logging.WARNING):
        assert deleted_by_retention(capsys, log_dir) == []
    [warning] = [r.getMessage() for r in caplog.records if "unknown configs" in r.getMessage()]
    assert warning.startswith("1 topic has unknown configs") and "topic-config --import" in warning, warning
    partition = explain_t0(capsys, log_dir)
    sources = partition["config_sources"]
    assert isinstance(sources, dict) and sources["cleanup.policy"] == sources["retention.ms"] == "unknown"
    segments = partition["segments"]
    assert isinstance(segments, list)
    assert {s["reason"] for s in segments} == {"unknown-topic-config"}
    cleaner = partition["cleaner"]
    assert isinstance(cleaner, dict) and cleaner["reason"] == "unknown-topic-config"
    code, out, _ = run(capsys, log_dir, "explain")
    assert code == 0 and "[unknown]" in out
    assert deleted_by_retention(capsys, log_dir, "--override", "unknown.topic.configs=broker-defaults") == [0]


@pytest.mark.parametrize(
    ("policy", "source", "deleted"),
    [("compact", "DYNAMIC_TOPIC_CONFIG", []), ("delete", "DEFAULT_CONFIG", [0])],
    ids=["its-own-config", "the-cluster-default"],
)
def test_an_import_makes_them_known(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, policy: str, source: str, deleted: list[int]
) -> None:
    """A topic the import describes is known, whether it sets configs of its own or takes the defaults."""
    log_dir = make_broker_dir(tmp_path / "logs", "t")
    described = tmp_path / "describe.txt"
    described.write_text(DESCRIBED.format(policy=policy, source=source))
    code, _, err = run(capsys, log_dir, "topic-config", "--import", str(described))
    assert code == 0, err
    assert deleted_by_retention(capsys, log_dir) == deleted
    sources = explain_t0(capsys, log_dir)["config_sources"]
    assert isinstance(sources, dict) and "unknown" not in sources.values()


def test_internal_topics_and_logcleaners_own_dir_are_not_held(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log_dir = make_broker_dir(tmp_path / "logs", "__consumer_offsets")
    sources = explain_t0(capsys, log_dir)["config_sources"]
    assert isinstance(sources, dict) and sources["cleanup.policy"] == "internal-topic-default"
    own = make_broker_dir(tmp_path / "own", "t")
    (own / "meta.properties").unlink()
    assert deleted_by_retention(capsys, own) == [0, 150, 300, 450], "logcleaner's own: the log end is the HW"

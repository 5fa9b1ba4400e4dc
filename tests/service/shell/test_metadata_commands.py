"""The offline commands and the daemon on a dir with a KRaft metadata log: its configs govern the topics,
each value says where it came from, and unreadable metadata stops the command instead of the defaults."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service.config.broker_config import BrokerConfig
from service.metadata.source import MetadataSource
from service.shell.cli import main
from service.shell.daemon import Daemon
from service.shell.node import TOPIC_CONFIG_REFRESH_MS
from service.storage.partition_metadata import new_topic_id, write_partition_metadata
from service.storage.topic_partition import TopicPartition
from tests.paths import REPO
from tests.service.cli_logs import DAY_MS, make_logs
from tests.service.metadata.metadata_helpers import (
    broker_config,
    partition,
    remove_topic,
    topic,
    topic_config,
    write_segment,
)

T_ID = new_topic_id()


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def compacted_in_metadata(log_dir: Path) -> Path:
    """Topic ``t`` (8 days old records) compacted by the metadata log; the cluster keeps 1 day."""
    make_logs(log_dir, age_ms=8 * DAY_MS)
    write_partition_metadata(log_dir / "t-0", T_ID)  # the broker's id: not a stray replica
    return write_segment(
        log_dir,
        [
            [topic("t", T_ID), topic_config("t", "cleanup.policy", "compact"), partition(T_ID, 0)],
            [
                broker_config("", "log.retention.hours", "24"),
                broker_config("1", "log.retention.bytes", "4096"),
            ],
        ],
    )


def test_a_topic_compacted_in_the_metadata_is_not_deleted_by_time(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    compacted_in_metadata(tmp_path)
    code, out, err = run(capsys, "retention", "--json", "--override", f"log.dirs={tmp_path}")
    assert code == 0, err
    assert json.loads(out)["deleted"] == []
    code, out, err = run(
        capsys,
        "retention",
        "--json",
        "--override",
        f"log.dirs={tmp_path}",
        "--override",
        "metadata.log.ignore=true",
    )
    assert code == 0, err
    assert {d["reason"] for d in json.loads(out)["deleted"]} == {"time"}, "ignored: the broker defaults apply"


def test_explain_and_topic_config_name_each_values_source(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    compacted_in_metadata(tmp_path)
    code, out, err = run(capsys, "explain", "--json", "--override", f"log.dirs={tmp_path}")
    assert code == 0, err
    (doc,) = json.loads(out)["partitions"]
    assert (
        doc["cleanup_policy"] == "compact"
        and doc["retention_ms"] == DAY_MS
        and doc["retention_bytes"] == 4096
    )
    sources = doc["config_sources"]
    assert (sources["cleanup.policy"], sources["retention.ms"], sources["retention.bytes"]) == (
        "metadata",
        "broker-dynamic",
        "broker-dynamic",
    )
    assert sources["segment.bytes"] == "default"
    code, out, err = run(capsys, "explain", "--override", f"log.dirs={tmp_path}")
    assert code == 0, err
    assert "cleanup.policy=compact [metadata]" in out and "(1d 0h) [broker-dynamic]" in out

    args = ["topic-config", "--topic", "t", "--json", "--override", f"log.dirs={tmp_path}"]
    code, out, err = run(capsys, *args, "--set", "retention.bytes=100")
    assert code == 0, err
    configs = {c["name"]: c for c in json.loads(out)["configs"]}
    assert configs["cleanup.policy"] == {"name": "cleanup.policy", "value": "compact", "source": "metadata"}
    assert configs["retention.bytes"] == {"name": "retention.bytes", "value": 100, "source": "override"}
    assert configs["retention.ms"]["source"] == "broker-dynamic"


def test_corrupt_metadata_stops_every_command_unless_ignored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    segment = compacted_in_metadata(tmp_path)
    data = bytearray(segment.read_bytes())
    data[40] ^= 0x01  # the first of two batches: corruption before the end, not a torn tail
    segment.write_bytes(bytes(data))
    for command in (["retention"], ["explain"], ["topic-config", "--topic", "t"]):
        code, out, err = run(capsys, *command, "--override", f"log.dirs={tmp_path}")
        assert code == 2, (command, out, err)
        assert f"{segment}, position 0" in err and "CRC" in err and len(err.strip().splitlines()) == 1
    code, _out, err = run(
        capsys, "explain", "--override", f"log.dirs={tmp_path}", "--override", "metadata.log.ignore=true"
    )
    assert code == 0, err


def test_serve_does_not_start_on_corrupt_metadata(tmp_path: Path) -> None:
    segment = compacted_in_metadata(tmp_path)
    data = bytearray(segment.read_bytes())
    data[40] ^= 0x01
    segment.write_bytes(bytes(data))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "service",
            "serve",
            "-q",
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            "api.port=0",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"{segment}, position 0: CRC mismatch" in done.stderr


def test_internal_topics_are_compacted_without_a_metadata_log(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    make_logs(tmp_path, age_ms=8 * DAY_MS)
    (tmp_path / "t-0").rename(tmp_path / "__consumer_offsets-0")
    code, out, err = run(capsys, "retention", "--json", "--override", f"log.dirs={tmp_path}")
    assert code == 0, err
    assert json.loads(out)["deleted"] == [], "committed offsets are never deleted by time"
    code, out, err = run(capsys, "explain", "--json", "--override", f"log.dirs={tmp_path}")
    (doc,) = json.loads(out)["partitions"]
    assert doc["cleanup_policy"] == "compact"
    assert doc["config_sources"]["cleanup.policy"] == "internal-topic-default"


def test_a_config_change_in_the_metadata_log_reaches_a_running_daemon_within_a_second(tmp_path: Path) -> None:
    compacted_in_metadata(tmp_path)
    broker, _ = BrokerConfig.from_properties(
        {"log.dirs": str(tmp_path), "scheduler.initial.delay.ms": "3600000", "api.port": "0"}
    )
    daemon = Daemon(broker)
    daemon.start()
    try:
        log = daemon.log_manager.get_log(TopicPartition("t", 0))
        assert log.config.is_compacted
        write_segment(tmp_path, [[topic_config("t", "cleanup.policy", "delete")]], base_offset=5)
        changed = time.monotonic()
        while log.config.is_compacted and time.monotonic() - changed < 10:
            time.sleep(0.02)
        took_s = time.monotonic() - changed
    finally:
        daemon.shutdown()
    assert not log.config.is_compacted
    assert dict(log.config.config_sources)["cleanup.policy"] == "metadata"
    assert took_s < 3 * TOPIC_CONFIG_REFRESH_MS / 1000, f"took {took_s:.2f} s"


def test_the_metadata_decides_which_replicas_are_stray(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Kafka's isStrayKraftReplica: a topic the metadata does not know, or deleted, an old incarnation's id,
    a partition assigned elsewhere. Such dirs are listed and never retained, however old their records."""
    ids = {"t": new_topic_id(), "gone": new_topic_id(), "reborn": new_topic_id(), "unknown": new_topic_id()}
    for name in ("t-0", "t-1", "gone-0", "unknown-0", "reborn-0"):
        _old_partition_dir(tmp_path, name, ids[name.rsplit("-", 1)[0]])
    reborn_now = new_topic_id()
    write_segment(
        tmp_path,
        [
            [topic("t", ids["t"]), partition(ids["t"], 0), partition(ids["t"], 1, replicas=(2, 3))],
            [topic("gone", ids["gone"]), partition(ids["gone"], 0), remove_topic(ids["gone"])],
            [topic("reborn", reborn_now), partition(reborn_now, 0)],
        ],
    )
    code, out, err = run(capsys, "explain", "--json", "--override", f"log.dirs={tmp_path}")
    assert code == 0, err
    reasons = {
        (d["topic"], d["partition"]): d.get("reason") for d in json.loads(out)["partitions"] if d["stray"]
    }
    assert set(reasons) == {("t", 1), ("gone", 0), ("unknown", 0), ("reborn", 0)}
    assert "does not assign this partition to this broker" in str(reasons["t", 1])
    assert "was deleted in the broker's metadata" in str(reasons["gone", 0])
    assert "not in the broker's metadata" in str(reasons["unknown", 0])
    assert f"is not the topic's {reborn_now}" in str(reasons["reborn", 0])

    code, out, err = run(capsys, "retention", "--json", "--override", f"log.dirs={tmp_path}")
    assert code == 0, err
    assert {(d["topic"], d["partition"]) for d in json.loads(out)["deleted"]} == {("t", 0)}
    for name in ("t-1", "gone-0", "unknown-0", "reborn-0"):
        assert (tmp_path / name / "00000000000000000000.log").exists(), name


def _old_partition_dir(log_dir: Path, name: str, topic_id: str) -> None:
    """``log_dir/name`` with 8-day-old records and the ``partition.metadata`` of ``topic_id``."""
    scratch = log_dir.parent / f"scratch-{name}"
    make_logs(scratch, age_ms=8 * DAY_MS)
    (scratch / "t-0").rename(log_dir / name)
    write_partition_metadata(log_dir / name, topic_id)


def test_a_running_daemon_keeps_the_configs_it_read_when_the_metadata_log_turns_unreadable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    segment = compacted_in_metadata(tmp_path)
    broker, _ = BrokerConfig.from_properties(
        {"log.dirs": str(tmp_path), "scheduler.initial.delay.ms": "3600000", "api.port": "0"}
    )
    daemon = Daemon(broker)
    daemon.start()
    try:
        log = daemon.log_manager.get_log(TopicPartition("t", 0))
        data = bytearray(segment.read_bytes())
        data[40] ^= 0x01
        segment.write_bytes(bytes(data))
        with caplog.at_level(logging.ERROR, logger="service.shell.daemon"):
            daemon.refresh_topic_configs()
            daemon.refresh_topic_configs()  # the same error again: logged once
        assert log.config.is_compacted, "the configs read before stay"
        errors = [r for r in caplog.records if "Cannot re-read the metadata log" in r.getMessage()]
        assert len(errors) == 1 and str(segment) in errors[0].getMessage()
    finally:
        daemon.shutdown()


def test_without_a_node_id_only_the_cluster_default_applies(tmp_path: Path) -> None:
    compacted_in_metadata(tmp_path)
    (tmp_path / "meta.properties").unlink()
    broker, _ = BrokerConfig.from_properties({"log.dirs": str(tmp_path)})
    source = MetadataSource(broker)
    source.load()
    assert source.node_id is None
    assert source.dynamic_configs.node == {} and source.dynamic_configs.cluster == {
        "log.retention.hours": "24"
    }
    known = source.known_topics()
    assert known is not None and known.assigned is None, "the assignment is not checked without a node id"


def test_a_running_daemon_warns_of_a_live_topic_the_metadata_deletes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    compacted_in_metadata(tmp_path)
    broker, _ = BrokerConfig.from_properties(
        {"log.dirs": str(tmp_path), "scheduler.initial.delay.ms": "3600000", "api.port": "0"}
    )
    daemon = Daemon(broker)
    daemon.start()
    try:
        write_segment(tmp_path, [[remove_topic(T_ID)]], base_offset=5)
        with caplog.at_level(logging.WARNING, logger="service.shell.daemon"):
            daemon.refresh_topic_configs()
            daemon.refresh_topic_configs()
        warnings = [
            r.getMessage() for r in caplog.records if "stays loaded until the next start" in r.getMessage()
        ]
        assert (
            len(warnings) == 1
            and "t-0" in warnings[0]
            and "was deleted in the broker's metadata" in warnings[0]
        )
        assert (tmp_path / "t-0").is_dir(), "reported, never deleted"
    finally:
        daemon.shutdown()

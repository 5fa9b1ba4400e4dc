"""One bad file costs one partition, not the daemon: each corrupt-file case the probe found,
all in one log dir, after a clean and after an unclean stop. The daemon starts, serves the healthy
partitions, recovers what the clean-shutdown marker wrongly vouched for, leaves out what it cannot load
(logged, listed by ``GET /v1/logs/failed``, counted by ``logcleaner_partitions_failed_to_load``) and keeps a
corrupt topic-config store aside."""

from __future__ import annotations

import logging
import os
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from service.config.topic_store import TOPIC_CONFIGS_FILE
from service.storage.clean_shutdown import remove_clean_shutdown_marker
from service.storage.records import iter_batches
from tests.api.conftest import Served, assert_problem, serve_daemon, string_record

_VALUES = [f"value-{i}" for i in range(6)]
_RECOVERED = ("marker-truncated", "marker-zero-padded", "marker-cut-at-a-batch")
_FAILED = ("garbage-swap", "truncated-swap", "stray-file", "magic-one")


def _produce(served: Served, topic: str) -> None:
    for value in _VALUES:  # one batch each
        response = served.client.post(
            f"/v1/topics/{topic}/partitions/0/records", json={"records": [string_record("k", value)]}
        )
        assert response.status_code == 200, response.text


def _legacy_message(offset: int, value: bytes) -> bytes:
    """A magic 1 message with a valid zlib CRC-32: a real old-format batch, not a torn write."""
    body = struct.pack(">bbq", 1, 0, 1_700_000_000_000) + struct.pack(">i", -1)
    body += struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def _break(log_dir: Path) -> dict[str, int]:
    """Each case's damage; returns how many records each recovered case keeps."""
    kept = {}
    for case in _RECOVERED:
        segment = log_dir / f"{case}-0" / f"{0:020d}.log"
        batches = list(iter_batches(segment.read_bytes()))
        if case == "marker-truncated":
            os.truncate(segment, segment.stat().st_size - 5)  # inside the last batch
            kept[case] = len(_VALUES) - 1
        elif case == "marker-zero-padded":
            _append(segment, bytes(4096))
            kept[case] = len(_VALUES)
        else:  # whole batches gone: only the indexes still point at them
            os.truncate(segment, batches[0].size_bytes + batches[1].size_bytes)
            kept[case] = 2
    first = log_dir / "garbage-swap-0" / f"{0:020d}.log"
    (first.parent / (first.name + ".swap")).write_bytes(b"\xde\xad" * 50)
    first = log_dir / "truncated-swap-0" / f"{0:020d}.log"
    swap = first.parent / (first.name + ".swap")
    shutil.copy(first, swap)
    os.truncate(swap, swap.stat().st_size - 5)
    (log_dir / "stray-file-0" / "00000000000000000abc.log").write_bytes(b"")
    _append(log_dir / "magic-one-0" / f"{0:020d}.log", _legacy_message(len(_VALUES), b"old"))
    (log_dir / TOPIC_CONFIGS_FILE).write_bytes(b'{"version": 2, "topics": {"healthy": ')
    return kept


@pytest.mark.parametrize("clean_stop", [True, False], ids=["marker", "no-marker"])
def test_corrupt_files_cost_their_partition_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, clean_stop: bool
) -> None:
    log_dir = tmp_path / "logs"
    with serve_daemon(log_dir) as served:
        for topic in ("healthy", *_RECOVERED, *_FAILED):
            response = served.client.post("/v1/topics", json={"name": topic, "partitions": 1})
            assert response.status_code == 201, response.text
            _produce(served, topic)
        response = served.client.patch("/v1/topics/healthy/configs", json={"set": {"retention.ms": "12345"}})
        assert response.status_code == 200, response.text
        response = served.client.post(
            "/v1/topics/stray-file/partitions/0/delete-records", json={"before_offset": 3}
        )
        assert response.status_code == 200, response.text
    kept = _break(log_dir)
    if not clean_stop:
        remove_clean_shutdown_marker(log_dir)

    with caplog.at_level(logging.INFO), serve_daemon(log_dir) as served:
        for topic, count in kept.items():  # recovered despite the marker, and served
            response = served.client.get(f"/v1/topics/{topic}/partitions/0/records")
            assert response.status_code == 200, response.text
            assert [r["offset"] for r in response.json()["records"]] == list(range(count)), topic
        response = served.client.get("/v1/topics/healthy/partitions/0/records")
        assert len(response.json()["records"]) == len(_VALUES)

        failures = served.client.get("/v1/logs/failed").json()
        failed = {f["topic"]: f for f in failures["partitions"]}
        assert sorted(failed) == sorted(_FAILED)
        assert all(f["partition"] == 0 and f["log_dir"] == str(log_dir.resolve()) for f in failed.values())
        stray = str(log_dir.resolve() / "stray-file-0" / "00000000000000000abc.log")
        assert stray in failed["stray-file"]["reason"]
        assert "magic 1" in failed["magic-one"]["reason"]
        for topic in _FAILED:
            assert f"{log_dir.resolve() / (topic + '-0')}" in caplog.text, "the log line names the dir"
            response = served.client.get(f"/v1/topics/{topic}/partitions/0/records")
            assert "failed to load" in str(assert_problem(response, 404)["detail"])
        assert_problem(served.client.post("/v1/topics", json={"name": "stray-file", "partitions": 1}), 409)
        metrics = served.client.get("/metrics").text
        assert f"logcleaner_partitions_failed_to_load {float(len(_FAILED))}" in metrics

        [aside] = failures["topic_config_files"]
        assert aside["path"] == str(log_dir / TOPIC_CONFIGS_FILE)
        assert Path(aside["kept_as"]).read_bytes().startswith(b'{"version": 2')
        configs = served.client.get("/v1/topics/healthy/configs").json()
        assert {c["name"]: c["source"] for c in configs["configs"]}["retention.ms"] == "default"
        assert "other log dirs" not in caplog.text
        assert "Traceback" not in caplog.text
        response = served.client.post(
            "/v1/topics/healthy/partitions/0/records", json={"records": [string_record("k", "more")]}
        )
        assert response.status_code == 200, response.text

    # The operator removes the stray file: the partition comes back, with its log start offset.
    (log_dir / "stray-file-0" / "00000000000000000abc.log").unlink()
    with serve_daemon(log_dir) as served:
        failed_topics = {f["topic"] for f in served.client.get("/v1/logs/failed").json()["partitions"]}
        assert failed_topics == set(_FAILED) - {"stray-file"}
        response = served.client.get("/v1/topics/stray-file/partitions/0/records")
        assert response.status_code == 200, response.text
        assert response.json()["log_start_offset"] == 3
        assert [r["offset"] for r in response.json()["records"]] == [3, 4, 5]

"""Corrupt data is never served: fetch checks every batch's CRC as a Kafka consumer with
``check.crcs=true`` does, over real HTTP against a real daemon, on real files changed under it."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from service.storage.records import iter_batches
from tests.api.conftest import Served, assert_problem, serve_daemon, string_record


def _produce(served: Served, topic: str, values: list[str]) -> None:
    """One batch per value (one produce request each)."""
    for value in values:
        response = served.client.post(
            f"/v1/topics/{topic}/partitions/0/records", json={"records": [string_record("k", value)]}
        )
        assert response.status_code == 200, response.text


def _fetch(served: Served, topic: str, offset: int) -> tuple[int, list[int], int]:
    """Status, the offsets fetched, and ``next_offset``."""
    response = served.client.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": offset})
    assert response.status_code == 200, response.text
    body = response.json()
    return response.status_code, [r["offset"] for r in body["records"]], body["next_offset"]


def _flip_value_byte(segment: Path, batch_index: int) -> None:
    """Flip the last byte of batch ``batch_index`` (inside its last record's value)."""
    data = segment.read_bytes()
    batch = list(iter_batches(data))[batch_index]
    position = batch.position + batch.size_bytes - 2
    fd = os.open(segment, os.O_RDWR)
    try:
        os.pwrite(fd, bytes([data[position] ^ 0x20]), position)
    finally:
        os.close(fd)


def _counter(served: Served, kind: str) -> float:
    text = served.client.get("/metrics").text
    prefix = f'logcleaner_fetch_faults_total{{kind="{kind}"}} '
    return float(next(line for line in text.splitlines() if line.startswith(prefix))[len(prefix) :])


def test_a_flipped_byte_is_never_served(served: Served, topic: str) -> None:
    _produce(served, topic, [f"value-{i}" for i in range(5)])
    segment = served.log_dir / f"{topic}-0" / f"{0:020d}.log"
    _flip_value_byte(segment, 2)
    before = _counter(served, "corrupt-batch")

    _, offsets, next_offset = _fetch(served, topic, 0)
    assert offsets == [0, 1], "the good records before the corrupt batch"
    assert next_offset == 2

    response = served.client.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 2})
    problem = assert_problem(response, 500)
    assert (problem["topic"], problem["partition"], problem["offset"]) == (topic, 0, 2)
    detail = str(problem["detail"])
    assert topic in detail and "offset 2" in detail and "CRC" in detail
    assert str(served.log_dir) not in response.text and ".log" not in detail, "no file path in a problem"
    assert _counter(served, "corrupt-batch") == before + 2

    _, offsets, _ = _fetch(served, topic, 3)  # past the corrupt batch, the log reads on
    assert offsets == [3, 4]


def test_a_corrupt_batch_header_mid_segment_stops_the_fetch_there(served: Served, topic: str) -> None:
    _produce(served, topic, [f"v{i}" for i in range(4)])
    segment = served.log_dir / f"{topic}-0" / f"{0:020d}.log"
    batch = list(iter_batches(segment.read_bytes()))[1]
    fd = os.open(segment, os.O_RDWR)
    try:
        os.pwrite(fd, (0x7FFFFFF0).to_bytes(4, "big"), batch.position + 8)  # a nonsense batch length
    finally:
        os.close(fd)
    assert _fetch(served, topic, 0)[1] == [0]
    response = served.client.get(f"/v1/topics/{topic}/partitions/0/records", params={"offset": 1})
    problem = assert_problem(response, 500)
    assert problem["offset"] == 1
    assert str(served.log_dir) not in response.text


def test_a_fetch_past_a_truncated_middle_segment_is_logged_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log_dir = tmp_path / "logs"
    with serve_daemon(log_dir) as served:
        response = served.client.post(
            "/v1/topics", json={"name": "gappy", "partitions": 1, "configs": {"segment.bytes": "300"}}
        )
        assert response.status_code == 201, response.text
        _produce(served, "gappy", [f"value-{i:02d}" for i in range(12)])
    partition_dir = log_dir / "gappy-0"
    segments = sorted(partition_dir.glob("*.log"))
    assert len(segments) >= 3
    middle = segments[1]
    batches = list(iter_batches(middle.read_bytes()))
    assert len(batches) >= 2
    os.truncate(middle, batches[0].size_bytes)  # whole batches lost at the end of a middle segment
    lost_from = batches[1].base_offset
    lost_to = int(segments[2].name[:20])

    with serve_daemon(log_dir) as served, caplog.at_level(logging.WARNING, logger="api.fetch"):
        assert _counter(served, "missing-range") == 0
        _, offsets, _ = _fetch(served, "gappy", 0)
        assert offsets == [o for o in range(12) if not lost_from <= o < lost_to]
        assert _counter(served, "missing-range") == 1
        assert f"missing offsets [{lost_from}, {lost_to})" in caplog.text

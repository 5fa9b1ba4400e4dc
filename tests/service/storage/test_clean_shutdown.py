"""The clean-shutdown marker (Kafka's ``CleanShutdownFileHandler``), byte for byte as Kafka has it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from service.base.errors import InvalidInputError
from service.storage.clean_shutdown import (
    read_clean_shutdown_marker,
    remove_clean_shutdown_marker,
    write_clean_shutdown_marker,
)
from service.storage.log_files import CLEAN_SHUTDOWN_FILE


def test_marker_with_broker_epoch(tmp_path: Path) -> None:
    write_clean_shutdown_marker(tmp_path, broker_epoch=200)

    assert (tmp_path / CLEAN_SHUTDOWN_FILE).read_bytes() == b'{"version":0,"brokerEpoch":200}'
    assert read_clean_shutdown_marker(tmp_path) == 200


def test_dir_without_marker_has_no_epoch(tmp_path: Path) -> None:
    assert read_clean_shutdown_marker(tmp_path) is None


def test_marker_default_epoch(tmp_path: Path) -> None:
    write_clean_shutdown_marker(tmp_path)

    assert (tmp_path / CLEAN_SHUTDOWN_FILE).read_bytes() == b'{"version":0,"brokerEpoch":-1}'
    assert read_clean_shutdown_marker(tmp_path) == -1
    assert [p.name for p in tmp_path.iterdir()] == [CLEAN_SHUTDOWN_FILE]  # no .tmp left


@pytest.mark.parametrize(
    ("content", "epoch"),
    [
        (b"", -1),  # Kafka before 3.7
        (b"\n", -1),
        (b'{"version":"0","broker_epoch":"42"}', 42),  # Kafka 3.7
        (b'{"broker_epoch":"42","version":"0"}', 42),
        (b"version: 0\nbrokerEpoch: 42", 42),  # the first KIP-966 form
        (b'{"version":0,"brokerEpoch":9223372036854775807}', 2**63 - 1),
        (b'{"version":1,"brokerEpoch":7,"extra":true}', 7),  # unknown fields ignored, as in Kafka
    ],
)
def test_marker_formats_kafka_has_written(tmp_path: Path, content: bytes, epoch: int) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(content)

    assert read_clean_shutdown_marker(tmp_path) == epoch


@pytest.mark.parametrize(
    "content",
    [b"garbage", b"\xff\xfe", b"[1,2]", b'{"version":0}', b'{"brokerEpoch":"x"}', b'{"brokerEpoch":true}'],
)
def test_unreadable_marker_counts_as_clean_without_epoch(
    tmp_path: Path, content: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(content)

    with caplog.at_level(logging.WARNING):
        assert read_clean_shutdown_marker(tmp_path) == -1
    assert CLEAN_SHUTDOWN_FILE in caplog.text


def test_remove_marker(tmp_path: Path) -> None:
    write_clean_shutdown_marker(tmp_path, broker_epoch=3)

    remove_clean_shutdown_marker(tmp_path)

    assert read_clean_shutdown_marker(tmp_path) is None
    remove_clean_shutdown_marker(tmp_path)  # absent: no error


@pytest.mark.parametrize("epoch", [2**63, True])
def test_marker_epoch_must_be_a_long(tmp_path: Path, epoch: int) -> None:
    with pytest.raises(InvalidInputError):
        write_clean_shutdown_marker(tmp_path, broker_epoch=epoch)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()

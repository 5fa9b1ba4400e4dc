"""Reading a metadata log on from where the last reading stopped (``MetadataSource.load_if_changed``):
each change gives the image a whole reading of the same files gives."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from service.config.broker_config import BrokerConfig
from service.metadata.image import MetadataImage
from service.metadata.log_reader import METADATA_PARTITION_DIR, MetadataLogFiles
from service.metadata.log_writer import (
    MetadataRecordSpec,
    encode_metadata_batch,
    encode_snapshot,
    snapshot_file_name,
)
from service.metadata.records import BEGIN_TRANSACTION_RECORD_KEY, END_TRANSACTION_RECORD_KEY
from service.metadata.source import MetadataSource
from service.metadata.tail import MetadataLogTail
from service.storage.partition_metadata import new_topic_id
from tests.service.metadata.metadata_helpers import (
    NOW_MS,
    broker_config,
    partition,
    partition_change,
    remove_topic,
    topic,
    topic_config,
    write_segment,
)

ORDERS_ID, AUDIT_ID = new_topic_id(), new_topic_id()
FIRST = [[topic("orders", ORDERS_ID), partition(ORDERS_ID, 0), topic_config("orders", "retention.ms", "5")]]


def source_of(log_dir: Path) -> MetadataSource:
    broker, _ = BrokerConfig.from_properties({"log.dirs": str(log_dir)})
    source = MetadataSource(broker)
    source.load()
    return source


def whole_reading(log_dir: Path) -> MetadataImage:
    """What a fresh reading of the same files gives: the image every change must equal."""
    image = source_of(log_dir).image
    assert image is not None
    return image


def append(segment: Path, specs: Sequence[MetadataRecordSpec], base_offset: int) -> bytes:
    batch = encode_metadata_batch(specs, base_offset=base_offset, timestamp=NOW_MS)
    with segment.open("ab") as file:
        file.write(batch)
    return batch


def new_segment(log_dir: Path, specs: Sequence[MetadataRecordSpec], base_offset: int) -> Path:
    """A segment written as a broker rolls one (``write_segment`` would rewrite ``meta.properties`` too,
    which is a change that makes the source read all)."""
    path = log_dir / METADATA_PARTITION_DIR / f"{base_offset:020d}.log"
    path.write_bytes(encode_metadata_batch(specs, base_offset=base_offset, timestamp=NOW_MS))
    return path


def read_on_spy(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record whether each change was read on (True) or read whole (False)."""
    outcomes: list[bool] = []
    original = MetadataLogTail.read_on

    def spy(self: MetadataLogTail, files: MetadataLogFiles) -> MetadataImage | None:
        image = original(self, files)
        outcomes.append(image is not None)
        return image

    monkeypatch.setattr(MetadataLogTail, "read_on", spy)
    return outcomes


def test_appended_batches_are_read_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    segment = write_segment(tmp_path, FIRST)
    source = source_of(tmp_path)
    outcomes = read_on_spy(monkeypatch)
    append(segment, [topic_config("orders", "retention.ms", "7"), topic("audit", AUDIT_ID)], 3)
    append(segment, [partition(AUDIT_ID, 0), partition_change(ORDERS_ID, 0, [1, 2])], 5)
    append(segment, [broker_config("", "log.retention.ms", "9"), remove_topic(AUDIT_ID)], 7)
    assert source.load_if_changed()
    assert outcomes == [True]
    assert source.image == whole_reading(tmp_path)
    assert source.image is not None and source.image.end_offset == 9
    assert source.image.topic_configs["orders"] == {"retention.ms": "7"}
    assert source.dynamic_configs.cluster == {"log.retention.ms": "9"}
    assert not source.load_if_changed(), "nothing changed since"


def test_a_torn_tail_is_read_once_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    segment = write_segment(tmp_path, FIRST)
    source = source_of(tmp_path)
    outcomes = read_on_spy(monkeypatch)
    batch = encode_metadata_batch(
        [topic_config("orders", "retention.ms", "8")], base_offset=3, timestamp=NOW_MS
    )
    with segment.open("ab") as file:
        file.write(batch[:20])  # the broker is mid-write
    assert source.load_if_changed()
    assert source.image is not None and source.image.topic_configs["orders"] == {"retention.ms": "5"}
    with segment.open("ab") as file:
        file.write(batch[20:])
    assert source.load_if_changed()
    assert outcomes == [True, True]
    assert source.image == whole_reading(tmp_path)
    assert source.image.topic_configs["orders"] == {"retention.ms": "8"}


def test_a_new_segment_is_read_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    segment = write_segment(tmp_path, FIRST)
    source = source_of(tmp_path)
    outcomes = read_on_spy(monkeypatch)
    append(segment, [topic_config("orders", "segment.ms", "100")], 3)
    second = new_segment(tmp_path, [topic("audit", AUDIT_ID), partition(AUDIT_ID, 0)], 4)
    assert source.load_if_changed()
    append(second, [topic_config("audit", "cleanup.policy", "compact")], 6)
    assert source.load_if_changed()
    assert outcomes == [True, True]
    assert source.image == whole_reading(tmp_path)
    assert source.image is not None and set(source.image.topics) == {"audit", "orders"}


def test_a_snapshot_makes_it_read_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_segment(tmp_path, FIRST)
    source = source_of(tmp_path)
    outcomes = read_on_spy(monkeypatch)
    snapshot = tmp_path / METADATA_PARTITION_DIR / snapshot_file_name(3, 1)  # as the broker writes one
    snapshot.write_bytes(
        encode_snapshot([topic("audit", AUDIT_ID), partition(AUDIT_ID, 0)], timestamp=NOW_MS)
    )
    assert source.load_if_changed()
    assert outcomes == [False], "a new snapshot: the whole log is read"
    assert source.image == whole_reading(tmp_path)
    assert source.image is not None and set(source.image.topics) == {"audit"}


def test_a_replaced_or_truncated_segment_makes_it_read_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment = write_segment(tmp_path, [*FIRST, [topic_config("orders", "retention.ms", "6")]])
    source = source_of(tmp_path)
    outcomes = read_on_spy(monkeypatch)
    with segment.open("r+b") as file:  # truncated below where the reading stopped
        file.truncate(os.path.getsize(segment) - 10)
    assert source.load_if_changed()
    segment.unlink()
    new_segment(tmp_path, [topic("audit", AUDIT_ID)], 0)  # a new file of the same name
    assert source.load_if_changed()
    assert outcomes == [False, False]
    assert source.image == whole_reading(tmp_path)
    assert source.image is not None and set(source.image.topics) == {"audit"}


def test_a_vanished_segment_makes_it_read_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_segment(tmp_path, FIRST)
    second = new_segment(tmp_path, [topic("audit", AUDIT_ID)], 3)
    source = source_of(tmp_path)
    outcomes = read_on_spy(monkeypatch)
    second.unlink()
    assert source.load_if_changed()
    assert outcomes == [False]
    assert source.image == whole_reading(tmp_path)
    assert source.image is not None and set(source.image.topics) == {"orders"}


def test_an_open_transaction_applies_when_its_end_is_read_on(tmp_path: Path) -> None:
    segment = write_segment(tmp_path, FIRST)
    begin = MetadataRecordSpec(BEGIN_TRANSACTION_RECORD_KEY, 0, {"name": "migration"})
    append(segment, [begin, topic_config("orders", "retention.ms", "11")], 3)
    source = source_of(tmp_path)
    assert source.image is not None and source.image.topic_configs["orders"] == {"retention.ms": "5"}
    append(segment, [MetadataRecordSpec(END_TRANSACTION_RECORD_KEY, 0, {})], 5)
    assert source.load_if_changed()
    assert source.image == whole_reading(tmp_path)
    assert source.image is not None and source.image.topic_configs["orders"] == {"retention.ms": "11"}


def test_known_topics_are_made_once_an_image(tmp_path: Path) -> None:
    segment = write_segment(tmp_path, FIRST)
    source = source_of(tmp_path)
    known = source.known_topics()
    assert known is not None and known is source.known_topics()
    append(segment, [topic("audit", AUDIT_ID), partition(AUDIT_ID, 0)], 3)
    assert source.load_if_changed()
    after = source.known_topics()
    assert after is not known and after is not None and set(after.topic_ids) == {"audit", "orders"}

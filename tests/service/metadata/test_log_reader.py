"""Reading a KRaft metadata log: snapshot then segments, torn tails, corruption, and Kafka's own files."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

import crc32c
import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from service.base.errors import CorruptDataError
from service.metadata.log_reader import find_metadata_log
from service.metadata.log_writer import MetadataRecordSpec, encode_control_batch
from service.storage.control import ControlRecordType
from service.storage.partition_metadata import new_topic_id
from service.storage.records import peek_batch_size
from tests.paths import FIXTURES
from tests.service.metadata.metadata_helpers import (
    NOW_MS,
    broker_config,
    metadata_dir,
    partition,
    partition_change,
    read_image,
    remove_topic,
    topic,
    topic_config,
    write_segment,
    write_snapshot,
)

ORDERS_ID, AUDIT_ID = new_topic_id(), new_topic_id()


def test_topics_partitions_and_configs_are_read(tmp_path: Path) -> None:
    write_segment(
        tmp_path,
        [
            [topic("orders", ORDERS_ID), topic_config("orders", "cleanup.policy", "compact")],
            [partition(ORDERS_ID, 0), partition(ORDERS_ID, 1, replicas=(2, 3))],
            [broker_config("", "log.retention.ms", "1000"), broker_config("1", "log.retention.ms", "2000")],
            [topic_config("orders", "retention.ms", "5"), topic_config("orders", "retention.ms", None)],
        ],
    )
    image = read_image(tmp_path)
    assert image.topics["orders"].topic_id == ORDERS_ID
    assert image.topics["orders"].partitions == {0: (1,), 1: (2, 3)}
    assert image.topic_configs == {"orders": {"cleanup.policy": "compact"}}, "a null value removes the key"
    assert image.broker_configs == {"": {"log.retention.ms": "1000"}, "1": {"log.retention.ms": "2000"}}
    assert image.end_offset == 8


def test_partition_changes_and_topic_removal(tmp_path: Path) -> None:
    write_segment(
        tmp_path,
        [
            [
                topic("orders", ORDERS_ID),
                partition(ORDERS_ID, 0),
                topic_config("orders", "retention.ms", "9"),
            ],
            [topic("audit", AUDIT_ID), partition(AUDIT_ID, 0)],
            [partition_change(ORDERS_ID, 0, [2, 3]), remove_topic(AUDIT_ID)],
        ],
    )
    image = read_image(tmp_path)
    assert image.topics["orders"].partitions == {0: (2, 3)}
    assert "audit" not in image.topics and image.removed_topics == {"audit": AUDIT_ID}
    assert image.topic_configs == {"orders": {"retention.ms": "9"}}


def test_the_snapshot_is_the_base_and_only_later_records_apply(tmp_path: Path) -> None:
    write_segment(
        tmp_path,
        [
            [topic("orders", ORDERS_ID), topic_config("orders", "retention.ms", "1")],  # offsets 0, 1
            [topic_config("orders", "retention.ms", "2")],  # 2: in the snapshot already
            [topic_config("orders", "segment.bytes", "4096")],  # 3: after it
        ],
    )
    write_snapshot(
        tmp_path,
        [topic("orders", ORDERS_ID), topic_config("orders", "retention.ms", "2"), partition(ORDERS_ID, 0)],
        end_offset=3,
    )
    # An older snapshot is ignored; the newest one wins.
    write_snapshot(tmp_path, [topic("old", new_topic_id())], end_offset=1)
    image = read_image(tmp_path)
    assert list(image.topics) == ["orders"]
    assert image.topic_configs == {"orders": {"retention.ms": "2", "segment.bytes": "4096"}}


def test_aborted_metadata_transactions_do_not_apply(tmp_path: Path) -> None:
    begin, end, abort = (
        MetadataRecordSpec(23, 0, {}),
        MetadataRecordSpec(24, 0, {}),
        MetadataRecordSpec(25, 0, {}),
    )
    write_segment(
        tmp_path,
        [
            [topic("orders", ORDERS_ID)],
            [begin, topic_config("orders", "retention.ms", "1"), abort],
            [begin, topic_config("orders", "segment.bytes", "4096"), end],
            [begin, topic_config("orders", "cleanup.policy", "compact")],  # never ended
        ],
    )
    assert read_image(tmp_path).topic_configs == {"orders": {"segment.bytes": "4096"}}


@pytest.mark.parametrize("tail", [b"\x00" * 100, "half a batch"])
def test_a_torn_tail_of_the_last_segment_is_ignored(tmp_path: Path, tail: bytes | str) -> None:
    path = write_segment(
        tmp_path, [[topic("orders", ORDERS_ID)], [topic_config("orders", "retention.ms", "1")]]
    )
    data = path.read_bytes()
    first_batch = peek_batch_size(data)
    if tail == "half a batch":
        path.write_bytes(data[: first_batch + 30])
    else:
        assert isinstance(tail, bytes)
        path.write_bytes(data + tail)
    image = read_image(tmp_path)
    assert list(image.topics) == ["orders"]
    expected = {} if tail == "half a batch" else {"orders": {"retention.ms": "1"}}
    assert image.topic_configs == expected


def test_corruption_before_the_end_names_the_file_and_position(tmp_path: Path) -> None:
    path = write_segment(
        tmp_path, [[topic("orders", ORDERS_ID)], [topic_config("orders", "retention.ms", "1")]]
    )
    data = bytearray(path.read_bytes())
    data[30] ^= 0xFF  # inside the first batch's CRC-covered bytes; a whole batch follows it
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError) as caught:
        read_image(tmp_path)
    assert caught.value.path == str(path) and caught.value.position == 0
    assert str(path) in str(caught.value) and "CRC" in str(caught.value)


def test_a_torn_earlier_segment_is_corruption(tmp_path: Path) -> None:
    first = write_segment(tmp_path, [[topic("orders", ORDERS_ID)]])
    write_segment(tmp_path, [[topic_config("orders", "retention.ms", "1")]], base_offset=1)
    first.write_bytes(first.read_bytes()[:-5])
    with pytest.raises(CorruptDataError, match="incomplete batch") as caught:
        read_image(tmp_path)
    assert caught.value.path == str(first)


def test_a_snapshot_without_its_footer_is_corrupt(tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path, [topic("orders", ORDERS_ID)], end_offset=1)
    data = snapshot.read_bytes()
    footer = encode_control_batch(
        ControlRecordType.SNAPSHOT_FOOTER, {"version": 0}, offset=2, timestamp=NOW_MS
    )
    assert data.endswith(footer)
    snapshot.write_bytes(data[: -len(footer)])
    with pytest.raises(CorruptDataError, match="SnapshotFooter") as caught:
        read_image(tmp_path)
    assert caught.value.path == str(snapshot)


def test_a_record_kafka_does_not_define_in_that_version_is_an_error(tmp_path: Path) -> None:
    path = write_segment(tmp_path, [[topic("orders", ORDERS_ID)]])
    data = bytearray(path.read_bytes())
    # The record's value starts with frame version 1, api key 2, version 0: make the version 7.
    at = data.index(bytes([1, 2, 0, 7]) + b"orders")
    data[at + 2] = 7
    path.write_bytes(encode_fixed_crc(bytes(data)))
    with pytest.raises(CorruptDataError, match="TopicRecord version 7") as caught:
        read_image(tmp_path)
    assert caught.value.path == str(path)


def encode_fixed_crc(data: bytes) -> bytes:
    """``data`` (one batch) with its CRC recomputed, so that only the content is wrong."""
    fixed = bytearray(data)
    fixed[17:21] = crc32c.crc32c(bytes(fixed[21:])).to_bytes(4, "big")
    return bytes(fixed)


@pytest.mark.parametrize("name", ["kraft-metadata-a.log", "kraft-metadata-b.log"])
def test_segments_a_real_broker_wrote_are_read(tmp_path: Path, name: str) -> None:
    fixture = FIXTURES / name
    base = 0 if name.endswith("a.log") else 1
    shutil.copyfile(fixture, metadata_dir(tmp_path) / f"{base:020d}.log")
    image = read_image(tmp_path)
    assert len(image.topics) == 1
    (only,) = image.topics.values()
    assert only.partitions and all(replicas == (1,) for replicas in only.partitions.values())
    assert image.end_offset == 4


def test_no_metadata_log_is_none(tmp_path: Path) -> None:
    assert find_metadata_log(tmp_path) is None


def test_a_topic_deleted_and_created_again_is_the_new_incarnation(tmp_path: Path) -> None:
    reborn = new_topic_id()
    write_segment(
        tmp_path,
        [
            [
                topic("orders", ORDERS_ID),
                partition(ORDERS_ID, 0),
                topic_config("orders", "retention.ms", "1"),
            ],
            [remove_topic(ORDERS_ID)],
            [topic("orders", reborn), partition(reborn, 0), partition(reborn, 1)],
        ],
    )
    image = read_image(tmp_path)
    assert image.topics["orders"].topic_id == reborn and image.topics["orders"].partitions == {
        0: (1,),
        1: (1,),
    }
    assert image.removed_topics == {}, "the name is live again"
    assert image.topic_configs == {}, "the old incarnation's configs went with it"


def test_a_record_naming_a_topic_id_no_topic_record_created_is_corrupt(tmp_path: Path) -> None:
    path = write_segment(tmp_path, [[partition(ORDERS_ID, 0)]])
    with pytest.raises(CorruptDataError, match=f"names topic id {ORDERS_ID}") as caught:
        read_image(tmp_path)
    assert caught.value.path == str(path)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 255))
def test_a_flipped_byte_anywhere_reads_or_fails_only_as_corrupt_data(at: int, mask: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        log_dir = Path(scratch)
        path = write_segment(
            log_dir,
            [
                [topic("orders", ORDERS_ID), partition(ORDERS_ID, 0)],
                [
                    topic_config("orders", "cleanup.policy", "compact"),
                    broker_config("", "log.retention.ms", "5"),
                ],
            ],
        )
        data = bytearray(path.read_bytes())
        data[at % len(data)] ^= mask
        path.write_bytes(bytes(data))
        with contextlib.suppress(CorruptDataError):
            read_image(log_dir)


def test_a_kind_the_image_does_not_use_at_a_version_it_does_not_know_is_skipped(tmp_path: Path) -> None:
    """A later Kafka may add a version of, say, FeatureLevelRecord: the image does not read it, so the
    log still reads (the kinds it applies must decode, as above)."""
    feature = MetadataRecordSpec(12, 0, {"name": "metadata.version", "feature_level": 7})
    path = write_segment(tmp_path, [[topic("orders", ORDERS_ID), feature]])
    data = bytearray(path.read_bytes())
    at = data.index(bytes([1, 12, 0]) + bytes([len("metadata.version") + 1]))  # frame 1, api key 12, v0
    data[at + 2] = 9
    path.write_bytes(encode_fixed_crc(bytes(data)))
    assert read_image(tmp_path).topics["orders"].topic_id == ORDERS_ID

"""Producer snapshots as Kafka's ``ProducerStateManager`` treats them at load, on dirs as a broker leaves
them: a producer whose batches retention deleted stays (KIP-360: only ``producer.id.expiration.ms`` expires
one), and a snapshot with a bad CRC is deleted (``removeAndDeleteSnapshot``), the state rebuilt from the
segments and a valid snapshot written at the next clean stop."""

from __future__ import annotations

from pathlib import Path

from service.base.clock import SystemClock
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.clean_shutdown import remove_clean_shutdown_marker
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.log_files import RECOVERY_POINT_CHECKPOINT
from service.storage.partition_metadata import new_topic_id, write_partition_metadata
from service.storage.producer_snapshot import read_snapshot
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.api.conftest import serve_daemon, string_record

T0 = TopicPartition("t", 0)
SEGMENT_BYTES = 300
EARLY_PRODUCER, LATE_PRODUCER = 7, 8


def broker_log(log_dir: Path, *, drop_first_segments: int = 0) -> int:
    """t-0: the early producer's batch, 20 plain ones, the late producer's; retention then deleted the
    first segments. Only the snapshot at the log end offset is left (Kafka deletes those below its
    recovery point); returns the log end offset."""
    (log_dir / "t-0").mkdir(parents=True)
    write_partition_metadata(log_dir / "t-0", new_topic_id())
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(segment_bytes=SEGMENT_BYTES), clock=SystemClock())
    log = loaded.logs[T0]
    now = SystemClock().now_ms()
    log.append_records(
        [Record(0, now, b"k", b"v")], producer_id=EARLY_PRODUCER, producer_epoch=0, base_sequence=0
    )
    for i in range(20):
        log.append_records([Record(0, now, b"k%d" % i, b"v")])
    log.append_records(
        [Record(0, now, b"k", b"v")], producer_id=LATE_PRODUCER, producer_epoch=0, base_sequence=0
    )
    for segment in log.delete_oldest_segments(drop_first_segments):
        segment.delete_files()
    end = log.log_end_offset
    close_log_dir(loaded)
    for snapshot in (log_dir / "t-0").glob("*.snapshot"):
        if snapshot.name != f"{end:020d}.snapshot":
            snapshot.unlink()
    return end


def snapshot_producers(log_dir: Path, offset: int) -> list[int]:
    return [e.producer_id for e in read_snapshot(log_dir / "t-0" / f"{offset:020d}.snapshot")]


def test_a_producer_below_the_log_start_offset_is_kept_after_an_unclean_stop(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    end = broker_log(log_dir, drop_first_segments=2)
    assert not (log_dir / "t-0" / f"{0:020d}.log").exists(), "the early producer's batch is gone"
    assert snapshot_producers(log_dir, end) == [EARLY_PRODUCER, LATE_PRODUCER]
    # An unclean stop: no marker, and the recovery point lags at a segment below the snapshot.
    remove_clean_shutdown_marker(log_dir)
    OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).write({T0: 12})

    with serve_daemon(log_dir) as served:
        response = served.client.post(
            "/v1/topics/t/partitions/0/records", json={"records": [string_record("k", "v")]}
        )
        assert response.status_code == 200, response.text
    assert snapshot_producers(log_dir, end + 1) == [EARLY_PRODUCER, LATE_PRODUCER]


def test_a_corrupt_snapshot_is_deleted_and_a_valid_one_written_at_the_next_stop(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    end = broker_log(log_dir)
    snapshot = log_dir / "t-0" / f"{end:020d}.snapshot"
    damaged = bytearray(snapshot.read_bytes())
    damaged[-1] ^= 0xFF  # in the last entry: the CRC no longer matches
    snapshot.write_bytes(bytes(damaged))

    with serve_daemon(log_dir):
        pass  # nothing reads or writes t-0 meanwhile
    assert snapshot.read_bytes() != bytes(damaged)
    assert snapshot_producers(log_dir, end) == [EARLY_PRODUCER, LATE_PRODUCER]

"""``nothing_to_clean``: before ``clean`` takes the log dirs, whether any partition would be cleaned (then
None, and ``clean`` runs), else each compacted partition with why not; a cleaner checkpoint that a run
would reset counts as work to do. It reads the logs as an inspection does: no file changes."""

from __future__ import annotations

from pathlib import Path

from service.base.clock import SystemClock
from service.config.broker_config import BrokerConfig
from service.core.log_manager import LogManager
from service.core.tasks import DeferredTasks
from service.shell.tools.clean_preview import NotCleaned, nothing_to_clean
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log_config import LogConfig
from service.storage.log_files import CLEANER_OFFSET_CHECKPOINT
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition
from tests.service.cli_logs import snapshot

SEGMENT_BYTES = 350  # five 70-byte keyed batches


def write_logs(log_dir: Path, *, compact: bool = True, segments: int = 3) -> None:
    """``orders-0`` (``segments`` full segments and an active one) and ``orders-1`` (active only), closed
    cleanly as a broker leaves them."""
    config = LogConfig(
        cleanup_policy=frozenset({"compact" if compact else "delete"}), segment_bytes=SEGMENT_BYTES
    )
    manager = LogManager([log_dir], lambda _t: config, clock=SystemClock(), scheduler=DeferredTasks())
    manager.startup()
    first, second = manager.create_topic("orders", 2)
    for i in range(5 * segments + 1):
        first.append_records([Record(0, -1, b"%d" % (i % 3), b"v")])
    second.append_records([Record(0, -1, b"k", b"v")])
    manager.shutdown()


def broker(log_dir: Path, **extra: str) -> BrokerConfig:
    props = {"log.dirs": str(log_dir), "log.cleanup.policy": "compact", **extra}
    config, _ = BrokerConfig.from_properties(props)
    return config


def test_a_partition_that_would_be_cleaned_means_run(tmp_path: Path) -> None:
    write_logs(tmp_path)
    before = snapshot(tmp_path)
    assert nothing_to_clean(broker(tmp_path)) is None
    assert snapshot(tmp_path) == before, "read as an inspection: nothing written"


def test_each_compacted_partition_says_why_not(tmp_path: Path) -> None:
    write_logs(tmp_path)
    before = snapshot(tmp_path)
    kept = nothing_to_clean(broker(tmp_path, **{"log.cleaner.min.cleanable.ratio": "1"}))
    assert kept is not None
    assert kept == [
        NotCleaned("orders", 0, 1.0, 1.0, 3 * SEGMENT_BYTES),
        NotCleaned("orders", 1, 0.0, 1.0, 0),
    ]
    assert [k.describe() for k in kept] == [
        "not cleaned orders-0: dirty ratio 1.000 is not above min.cleanable.dirty.ratio=1.0",
        "not cleaned orders-1: nothing dirty below its active segment",
    ]
    assert snapshot(tmp_path) == before


def test_a_checkpoint_a_run_would_reset_means_run(tmp_path: Path) -> None:
    """A checkpoint past the log end is reset by the cleaner (Kafka rewrites it): the run changes files,
    though it cleans nothing."""
    write_logs(tmp_path)
    OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).write({TopicPartition("orders", 1): 999})
    ratio_one = broker(tmp_path, **{"log.cleaner.min.cleanable.ratio": "1"})
    assert nothing_to_clean(ratio_one) is None
    OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).write({TopicPartition("orders", 1): 0})
    assert nothing_to_clean(ratio_one) is not None, "a checkpoint in range stays as it is"


def test_without_compacted_partitions_nothing_is_listed(tmp_path: Path) -> None:
    write_logs(tmp_path, compact=False)
    assert nothing_to_clean(broker(tmp_path, **{"log.cleanup.policy": "delete"})) == []

"""A log dir as a broker leaves it after a clean stop, with a high watermark below the log end.

Partition ``<topic>-0`` holds ``SEGMENTS`` segments of ``PER_SEGMENT`` keyed records (keys ``k0``..``k9``
cycling), ten days old, at base offsets 0, 150, 300, 450 and an empty active segment at 600. The dir's
``replication-offset-checkpoint`` says the broker had acknowledged up to ``HIGH_WATERMARK`` (160), and
also lists a ``-future`` replica's partition that logcleaner does not manage, as Kafka writes it. The dir's
``meta.properties`` is a ZooKeeper-era broker's (``broker.id``, no metadata log): who leads is not known,
so the checkpoint's high watermark holds.
"""

from __future__ import annotations

from pathlib import Path

from service.base.clock import SystemClock
from service.storage.checkpoints import decode_checkpoint, encode_checkpoint
from service.storage.log_config import LogConfig
from service.storage.log_dir import close_log_dir, load_log_dir
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition

__all__ = [
    "FUTURE",
    "FUTURE_HIGH_WATERMARK",
    "HIGH_WATERMARK",
    "LOG_END",
    "PER_SEGMENT",
    "high_watermark_file",
    "make_broker_dir",
    "read_high_watermark_file",
]

PER_SEGMENT = 150
SEGMENTS = 4
LOG_END = PER_SEGMENT * SEGMENTS
HIGH_WATERMARK = 160
FUTURE = TopicPartition("moving", 0)  # a replica being moved here: ``moving-0.<id>-future``
FUTURE_HIGH_WATERMARK = 55
DAY_MS = 86_400_000


def make_broker_dir(log_dir: Path, topic: str, *, high_watermark: int | None = HIGH_WATERMARK) -> Path:
    """Write the dir (module docstring); ``high_watermark`` None: the file does not list ``topic``-0."""
    (log_dir / f"{topic}-0").mkdir(parents=True)
    loaded = load_log_dir(log_dir, lambda _t: LogConfig(), clock=SystemClock())
    log = loaded.logs[TopicPartition(topic, 0)]
    stamp = SystemClock().now_ms() - 10 * DAY_MS
    for offset in range(LOG_END):
        log.append_records([Record(0, stamp, b"k%d" % (offset % 10), b"v%d" % offset)])
        if (offset + 1) % PER_SEGMENT == 0:
            log.roll()
    close_log_dir(loaded)
    future = log_dir / f"{FUTURE.topic}-{FUTURE.partition}.{'ab' * 16}-future"
    future.mkdir()
    (future / f"{0:020d}.log").write_bytes(b"")
    entries = {FUTURE: FUTURE_HIGH_WATERMARK}
    if high_watermark is not None:
        entries[TopicPartition(topic, 0)] = high_watermark
    high_watermark_file(log_dir).write_bytes(encode_checkpoint(entries))
    (log_dir / "meta.properties").write_text("version=0\nbroker.id=0\n")
    return log_dir


def high_watermark_file(log_dir: Path) -> Path:
    return log_dir / "replication-offset-checkpoint"


def read_high_watermark_file(log_dir: Path) -> dict[TopicPartition, int]:
    return decode_checkpoint(high_watermark_file(log_dir).read_bytes())

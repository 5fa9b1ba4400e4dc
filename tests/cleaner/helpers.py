"""Kafka LogCleanerTest's helpers and observables on real logs, with a manual clock.

Keys and values are decimal strings (``keyed(7)`` is key ``b"7"``, value ``b"7"``). Observables:
``offsets`` (records with a key and a value, control markers included), ``keys`` (non-control records
with a value, as ints), ``batch_last_offsets``/``batch_base_offsets`` (every batch, empty ones included),
``last_seq`` (last sequence of a producer's last data batch on disk).
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cleaner.compaction.cleaner import Cleaner, CleaningResult
from cleaner.engine import InProcessEngine
from cleaner.pool.log_cleaner import LogCleaner
from service.base.clock import ManualClock, SystemClock
from service.config.broker_config import BrokerConfig
from service.config.topic_store import TopicConfigStore
from service.core.tasks import DeferredTasks, ManualTaskScheduler
from service.shell.node import build_compacted_log_manager, build_log_cleaner
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.control import encode_end_txn_marker_batch
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LONG_MAX, LogConfig
from service.storage.log_files import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX
from service.storage.records import (
    Record,
    RecordBatch,
    encode_batch,
)
from service.storage.segment import LogSegment
from service.storage.topic_partition import TopicPartition
from service.storage.txn_index import AbortedTxn

__all__ = [
    "DAY_MS",
    "LARGE_TIMESTAMP",
    "LONG_MAX",
    "Producer",
    "aborted_txns",
    "all_batches",
    "batch_base_offsets",
    "batch_last_offsets",
    "clean",
    "compact_config",
    "follower_log",
    "keyed",
    "keys",
    "last_seq",
    "make_cleaner",
    "new_log",
    "offsets",
    "tomb",
]

DAY_MS = 86_400_000  # delete.retention.ms default
LARGE_TIMESTAMP = LONG_MAX - DAY_MS - 1


def compact_config(**fields: Any) -> LogConfig:
    """LogCleanerTest's topic config: segment.bytes and segment.index.bytes 1024, compact, unless given."""
    defaults: dict[str, Any] = {
        "segment_bytes": 1024,
        "segment_index_bytes": 1024,
        "cleanup_policy": frozenset({"compact"}),
    }
    defaults.update(fields)
    return LogConfig(**defaults)


def new_log(directory: Path, clock: ManualClock, **fields: Any) -> PartitionLog:
    directory.mkdir(parents=True, exist_ok=True)
    return load_partition_log(directory, compact_config(**fields), clock=clock).log


def make_cleaner(
    clock: ManualClock,
    *,
    scheduler: ManualTaskScheduler | None = None,
    check_aborted: Callable[[], None] | None = None,
    max_map_entries: int | None = None,
) -> Cleaner:
    """Kafka's ``makeCleaner``: deletions go to ``scheduler`` (run at once when there is none)."""

    def delete(delay_ms: int, task: Callable[[], None]) -> None:
        if scheduler is None:
            task()
        else:
            scheduler.schedule_once("delete-file", delay_ms, task)

    return Cleaner(
        clock=clock,
        schedule_delete=delete,
        check_aborted=check_aborted or (lambda: None),
        max_map_entries=max_map_entries,
    )


def clean(
    log: PartitionLog,
    clock: ManualClock,
    first_dirty: int = 0,
    upper_bound: int | None = None,
    *,
    at: int | None = None,
    max_map_entries: int | None = None,
) -> int:
    """One round ``clean(first_dirty, upper_bound)`` at time ``at`` (default: now); returns the end offset."""
    return clean_result(
        log, clock, first_dirty, upper_bound, at=at, max_map_entries=max_map_entries
    ).end_offset


def clean_result(
    log: PartitionLog,
    clock: ManualClock,
    first_dirty: int = 0,
    upper_bound: int | None = None,
    *,
    at: int | None = None,
    max_map_entries: int | None = None,
) -> CleaningResult:
    round_clock = clock if at is None else ManualClock(at)
    upper = log.active_segment.base_offset if upper_bound is None else upper_bound
    return make_cleaner(round_clock, max_map_entries=max_map_entries).clean(log, first_dirty, upper)


# -- appends ------------------------------------------------------------------------------------------------


def keyed(key: int | bytes, value: int | bytes | None = None, timestamp: int = -1) -> Record:
    """``keyed(k)`` = key and value the digits of k; ``keyed(k, None)`` is not a tombstone, use ``tomb``."""
    key_bytes = key if isinstance(key, bytes) else str(key).encode()
    if value is None:
        value = key
    value_bytes = value if isinstance(value, bytes) else str(value).encode()
    return Record(0, timestamp, key_bytes, value_bytes)


def tomb(key: int | bytes, timestamp: int = -1) -> Record:
    key_bytes = key if isinstance(key, bytes) else str(key).encode()
    return Record(0, timestamp, key_bytes, None)


@dataclass
class Producer:
    """An idempotent or transactional producer: ``send`` numbers sequences, markers end transactions."""

    log: PartitionLog
    producer_id: int
    epoch: int = 0
    transactional: bool = True
    sequence: int = 0
    offsets: list[int] = field(default_factory=list)

    def send(self, *keys: int | bytes, sequence: int | None = None) -> list[int]:
        base_sequence = self.sequence if sequence is None else sequence
        info = self.log.append_records(
            [keyed(k) for k in keys],
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=base_sequence,
            is_transactional=self.transactional,
        )
        self.sequence = base_sequence + len(keys)
        return list(info.record_offsets)

    def records(self, records: list[Record]) -> None:
        self.log.append_records(
            records,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=self.sequence,
            is_transactional=self.transactional,
        )
        self.sequence += len(records)

    def commit(self) -> int:
        return self._marker(commit=True)

    def abort(self) -> int:
        return self._marker(commit=False)

    def _marker(self, *, commit: bool) -> int:
        marker = encode_end_txn_marker_batch(
            offset=0,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            commit=commit,
            timestamp=self.log.clock.now_ms(),
        )
        return self.log.append_batches(marker).first_offset


def follower_log(
    directory: Path,
    clock: ManualClock,
    segments: Iterable[Iterable[Record]],
    *,
    active_base: int | None = None,
    empty_active: bool = True,
    **fields: Any,
) -> PartitionLog:
    """A log whose segments hold records at the offsets given (a follower's appends), then loaded.

    Each inner iterable is one segment based at its first record's offset; each record is its own batch.
    An empty active segment follows at ``active_base`` (default: the next offset) unless ``empty_active``
    is false, when the last segment given is the active one.
    """
    directory.mkdir(parents=True, exist_ok=True)
    config = compact_config(**fields)
    next_offset = 0
    for records in segments:
        batch_list = [encode_batch([r]) for r in records]
        base = records_offset(batch_list[0])
        segment = LogSegment.create(directory, base, config=config, now_ms=clock.now_ms())
        for data in batch_list:
            offset = records_offset(data)
            segment.append(data, largest_offset=offset, max_timestamp=-1, offset_of_max_timestamp=offset)
            next_offset = offset + 1
        segment.close()
    if empty_active:
        base = next_offset if active_base is None else active_base
        LogSegment.create(directory, base, config=config, now_ms=clock.now_ms()).close()
    return load_partition_log(directory, config, clock=clock).log


def records_offset(data: bytes) -> int:
    return int.from_bytes(data[:8], "big", signed=True)


# -- observables --------------------------------------------------------------------------------------------


def all_batches(log: PartitionLog) -> list[RecordBatch]:
    return [b for s in log.segments for b in s.batches(verify_crc=True)]


def offsets(log: PartitionLog) -> list[int]:
    return [
        r.offset for b in all_batches(log) for r in b.records() if r.key is not None and r.value is not None
    ]


def keys(log: PartitionLog) -> list[int]:
    return [
        int(r.key)
        for b in all_batches(log)
        if not b.is_control
        for r in b.records()
        if r.key is not None and r.value is not None
    ]


def batch_last_offsets(log: PartitionLog) -> list[int]:
    return [b.last_offset for b in all_batches(log)]


def batch_base_offsets(log: PartitionLog) -> list[int]:
    return [b.base_offset for b in all_batches(log)]


def last_seq(log: PartitionLog, producer_id: int) -> int:
    data = [b for b in all_batches(log) if b.producer_id == producer_id and not b.is_control]
    return data[-1].last_sequence if data else -1


def aborted_txns(log: PartitionLog) -> list[AbortedTxn]:
    return [t for s in log.segments for t in s.txn_index.all_aborted()]


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Until ``condition()`` holds; an AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def flip_byte(path: Path, position: int) -> None:
    """Corrupt one byte of ``path`` in place (its bits inverted)."""
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0xFF]))


def recover_and_check(
    directory: Path, config: LogConfig, clock: ManualClock, expected: list[int]
) -> PartitionLog:
    log = load_partition_log(directory, config, clock=clock).log
    assert keys(log) == expected
    names = [p.name for p in directory.iterdir()]
    assert not [n for n in names if n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX))]
    return log


class Env:
    """A LogManager over one temp log dir (compacted by default) and a cleaner pool built as the daemon
    builds it; ``deleted`` collects the delayed file deletions."""

    def __init__(self, log_dir: Path, **overrides: str) -> None:
        self.log_dir = log_dir
        props = {"log.dirs": str(log_dir), **BROKER_DEFAULTS, **overrides}
        self.broker, _ = BrokerConfig.from_properties(props)
        self.tasks = DeferredTasks()
        self.store = TopicConfigStore([log_dir])
        self.manager, self.cleaning = build_compacted_log_manager(
            self.broker, self.store, clock=SystemClock(), scheduler=self.tasks
        )
        self.manager.startup()
        self.engine = InProcessEngine(self.manager.clock)

    def cleaner(self, threads: int = 1) -> LogCleaner:
        return build_log_cleaner(
            self.broker, self.manager, self.cleaning, self.engine, scheduler=self.tasks, threads=threads
        )

    def topic(self, name: str, partitions: int = 1) -> list[PartitionLog]:
        return self.manager.create_topic(name, partitions)

    def checkpoints(self) -> dict[TopicPartition, int]:
        return OffsetCheckpointFile(self.log_dir / "cleaner-offset-checkpoint").read()

    def close(self) -> None:
        self.tasks.run_all()
        self.manager.shutdown()


def write_keys(log: PartitionLog, keys: range, *, rounds: int, tag: str = "v") -> None:
    """``rounds`` overwrites of every key, one batch per 10 keys."""
    for r in range(rounds):
        for start in range(keys.start, keys.stop, 10):
            batch = [
                Record(0, -1, b"k%d" % k, f"{tag}{r}-{k}".encode())
                for k in range(start, min(start + 10, keys.stop))
            ]
            log.append_records(batch)


def legacy_message(offset: int) -> bytes:
    """A magic 0 message (its own message set) with a valid zlib CRC-32: real, but unsupported."""
    body = struct.pack(">bbii", 0, 0, -1, 1) + b"v"
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


BROKER_DEFAULTS = {
    "log.cleanup.policy": "compact",
    "log.segment.bytes": "1024",
    "log.cleaner.backoff.ms": "20",
    "log.cleaner.engine": "in-process",
}

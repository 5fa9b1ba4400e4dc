"""The reference cleaning: slow, sequential, in process, built on the same rules.

The Spark path must leave a log that ``log_contents`` reads exactly as it reads the log this module
cleaned at the same time from the same first dirty offset and upper bound. Nothing here is clever: the
whole dirty section goes into one in-memory key map, groups are cleaned one after the other, the old
segments are deleted at once, and nothing can abort it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cleaner.compaction.cleaner import Cleaner, CleaningResult
from service.base.clock import ManualClock
from service.storage.log import PartitionLog
from service.storage.records import Record

__all__ = ["BatchView", "clean_in_process", "log_contents"]


@dataclass(frozen=True, slots=True)
class BatchView:
    """Everything a reader can observe of one batch (its CRC and byte layout aside)."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    delete_horizon_ms: int | None
    compression: int
    timestamp_type: int
    max_timestamp: int
    partition_leader_epoch: int
    records: tuple[Record, ...]


def clean_in_process(
    log: PartitionLog,
    first_dirty_offset: int,
    upper_bound_offset: int,
    now_ms: int,
    *,
    max_map_entries: int | None = None,
) -> CleaningResult:
    """One cleaning round at ``now_ms``, exactly as the rules say; returns the end offset and stats."""

    def delete_now(_delay_ms: int, delete: Callable[[], None]) -> None:
        delete()

    cleaner = Cleaner(clock=ManualClock(now_ms), schedule_delete=delete_now, max_map_entries=max_map_entries)
    return cleaner.clean(log, first_dirty_offset, upper_bound_offset)


def log_contents(log: PartitionLog) -> list[BatchView]:
    """Every batch of every segment, in order, as a reader sees it."""
    return [
        BatchView(
            batch.base_offset,
            batch.last_offset,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            batch.is_transactional,
            batch.is_control,
            batch.delete_horizon_ms,
            int(batch.compression),
            int(batch.timestamp_type),
            batch.max_timestamp,
            batch.partition_leader_epoch,
            tuple(batch.records()),
        )
        for segment in log.segments
        for batch in segment.batches(verify_crc=True)
    ]

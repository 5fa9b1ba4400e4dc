"""Everything a parallel round decides on the driver before any record is read (Kafka ``doClean``'s set-up).

The same steps as ``Cleaner.clean``, in the same order: the upper bound rounded down to a segment base;
the dirty section [first dirty, upper bound); the end offset (the key map holds the whole dirty section, so
it is always the upper bound: the map's latest offset is upper bound − 1); the groups of every segment
below it but the active one (``group_segments_by_size``); each group's aborted-transaction lists and
starting transaction state (``txn_replay``); the active producers (``ProducerScan``, as the in-process
round sees them before each group: nothing the round swaps in changes them). The producers' scan (in C,
without the GIL) runs on a thread of its own while the header replay (Python) runs: both only read.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from cleaner.compaction.cleaner import group_aborted_txns, round_down_to_segment
from cleaner.compaction.grouping import group_segments_by_size
from cleaner.compaction.offset_map import segments_overlapping
from cleaner.compaction.rules import LastRecord, ProducerScan
from cleaner.compaction.txn_metadata import CleanedTransactionMetadata
from cleaner.spark.txn_replay import MapScan, replay_headers
from service.storage.log import PartitionLog
from service.storage.segment import LogSegment
from service.storage.txn_index import AbortedTxn

__all__ = ["GroupPlan", "RoundPlan", "plan_round"]


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """One group of segments, cleaned into one segment based at its first segment's base offset."""

    segments: tuple[LogSegment, ...]
    aborted_txns: tuple[tuple[AbortedTxn, ...], ...]  # clean_group's aborted_txns, per segment
    txn_state: CleanedTransactionMetadata  # before the group's first batch

    @property
    def base_offset(self) -> int:
        return self.segments[0].base_offset


@dataclass(frozen=True, slots=True)
class RoundPlan:
    first_dirty_offset: int
    upper_bound: int  # rounded down to a segment base
    end_offset: int  # the next round's first dirty offset
    now_ms: int
    has_dirty_segments: bool
    groups: tuple[GroupPlan, ...]
    active_producers: Mapping[int, LastRecord]
    map_scan: MapScan

    @property
    def map_latest_offset(self) -> int:
        return self.end_offset - 1


def plan_round(
    log: PartitionLog, first_dirty_offset: int, upper_bound_offset: int, now_ms: int
) -> RoundPlan | None:
    """The round over [first dirty, upper bound) as ``Cleaner.clean`` would run it; None if it is empty."""
    segments = log.segments
    upper = round_down_to_segment(segments, upper_bound_offset)
    if upper < first_dirty_offset:
        return None
    dirty = segments_overlapping(segments, first_dirty_offset, upper)
    end_offset = upper
    below_end = [s for s in segments_overlapping(segments, 0, end_offset) if s is not segments[-1]]
    groups = group_segments_by_size(
        below_end, log.config.segment_bytes, log.config.segment_index_bytes, upper
    )
    aborted = [group_aborted_txns(segments, group) for group in groups]
    with ThreadPoolExecutor(1, thread_name_prefix="logcleaner-producers") as pool:
        producers = pool.submit(ProducerScan().refresh, log)
        replay = replay_headers(groups, aborted, segments, dirty, first_dirty_offset, upper)
        active_producers = producers.result()
    return RoundPlan(
        first_dirty_offset=first_dirty_offset,
        upper_bound=upper,
        end_offset=end_offset,
        now_ms=now_ms,
        has_dirty_segments=bool(dirty),
        groups=tuple(
            GroupPlan(tuple(group), tuple(tuple(txns) for txns in lists), state)
            for group, lists, state in zip(groups, aborted, replay.group_start_states, strict=True)
        ),
        active_producers=active_producers,
        map_scan=replay.map_scan,
    )

"""What one cleaning round of a log would free, read and decided exactly as the round decides it, written
nowhere (``logcleaner explain --summary --exact``).

The round's own steps: the key map over the dirty section (``build_offset_map``, unbounded: a round that
spills stays whole), then every batch below the map's end through the transaction state and the record
rules (``rules.filter_batch``). Freed bytes are each batch's size less what the round would write for it;
the rewritten batches are built (and compressed) as the round builds them, so the figure is the round's to
the byte. Segment files' indexes are not counted: the summary counts ``.log`` bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cleaner.compaction.cleaner import group_aborted_txns, round_down_to_segment
from cleaner.compaction.offset_map import OffsetMap, build_offset_map, segments_overlapping
from cleaner.compaction.rules import CleaningContext, ProducerScan, filter_batch
from cleaner.compaction.stats import CleanerStats
from cleaner.compaction.txn_metadata import CleanedTransactionMetadata
from service.base.clock import Clock
from service.base.errors import corrupt_data_in
from service.storage.log import PartitionLog

__all__ = ["RoundMeasure", "measure_round"]


@dataclass(frozen=True, slots=True)
class RoundMeasure:
    bytes_read: int  # the dirty section once for the map, then every segment below its end
    bytes_freed: int


def measure_round(
    log: PartitionLog,
    first_dirty_offset: int,
    upper_bound_offset: int,
    clock: Clock,
    on_read: Callable[[int], None] | None = None,
) -> RoundMeasure:
    """The bytes a round over [first_dirty_offset, upper_bound_offset) would free; ``on_read(n)`` after
    each segment read (a progress bar)."""
    report = on_read or (lambda _n: None)
    now_ms = clock.now_ms()
    segments = log.snapshot.segments
    upper = round_down_to_segment(segments, upper_bound_offset)
    if upper <= first_dirty_offset:
        return RoundMeasure(0, 0)
    stats = CleanerStats.start(clock)
    offset_map = OffsetMap()
    build_offset_map(segments, first_dirty_offset, upper, offset_map, stats)
    report(stats.map_bytes_read)
    end = offset_map.latest_offset + 1
    below_end = [s for s in segments_overlapping(segments, 0, end) if s is not segments[-1]]
    ctx = CleaningContext(
        offset_map.lookup,
        offset_map.latest_offset,
        now_ms,
        log.config.delete_retention_ms,
        upper,
        ProducerScan().refresh(log),
    )
    txn_state = CleanedTransactionMetadata()
    freed = 0
    read = stats.map_bytes_read
    for segment, aborted in zip(below_end, group_aborted_txns(segments, below_end), strict=True):
        txn_state.add_aborted_transactions(aborted)
        with corrupt_data_in(segment.log_path):
            for batch in segment.batches(verify_crc=True):
                if batch.is_control:
                    can_discard = txn_state.on_control_batch_read(batch).can_discard
                else:
                    can_discard = txn_state.on_batch_read(batch)
                outcome = filter_batch(batch, can_discard=can_discard, ctx=ctx)
                freed += batch.size_bytes - (len(outcome.data) if outcome.data is not None else 0)
        read += segment.size_bytes
        report(segment.size_bytes)
    return RoundMeasure(read, freed)

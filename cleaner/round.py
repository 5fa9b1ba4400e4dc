"""One cleaning round as the workers run it: a ``CompactionEngine`` over the candidate's cleanable range,
throttled, its replaced files deleted later by the scheduler, reported as a ``RoundOutcome``."""

from __future__ import annotations

from collections.abc import Callable

from cleaner.engine import CompactionEngine
from cleaner.manager import Candidate
from cleaner.worker import CleanFn, RoundOutcome
from service.ports import TaskScheduler

__all__ = ["engine_round"]


def engine_round(
    engine: CompactionEngine, *, throttle: Callable[[int], None], scheduler: TaskScheduler
) -> CleanFn:
    """The ``CleanFn`` the workers call: clean [first dirty, first uncleanable) of the candidate."""

    def schedule_delete(delay_ms: int, delete: Callable[[], None]) -> None:
        scheduler.schedule_once("delete-file", delay_ms, delete)

    def clean(candidate: Candidate, check_aborted: Callable[[], None], worker_id: int) -> RoundOutcome:
        to_clean = candidate.to_clean
        result = engine.clean(
            candidate.log,
            to_clean.first_dirty_offset,
            to_clean.first_uncleanable_offset,
            check_aborted=check_aborted,
            throttle=throttle,
            schedule_delete=schedule_delete,
            thread_id=max(worker_id, 0),
        )
        stats = result.stats
        tp = candidate.topic_partition
        return RoundOutcome(
            topic=tp.topic,
            partition=tp.partition,
            first_dirty_offset=to_clean.first_dirty_offset,
            end_offset=result.end_offset,
            stats={**stats.to_json(), "engine": result.engine},
            buffer_utilization_percent=100 * stats.buffer_utilization,
            max_compaction_delay_ms=to_clean.max_compaction_delay_ms,
            duration_s=stats.elapsed_ms / 1000,
            bytes_read=stats.bytes_read,
            bytes_written=stats.bytes_written,
            engine=result.engine,
        )

    return clean

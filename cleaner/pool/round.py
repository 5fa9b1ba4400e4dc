"""One cleaning round as the workers run it: a ``CompactionEngine`` over the candidate's cleanable range,
throttled, its replaced files deleted later by the scheduler, reported as a ``RoundOutcome``.
``engine_rounds`` does the same for several candidates at once (``clean_many``: one Spark job)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cleaner.compaction.cleaner import CleaningResult
from cleaner.engine import CompactionEngine, LogRound
from cleaner.pool.manager import Candidate
from cleaner.pool.worker import CleanFn, CleanManyFn, RoundOutcome
from service.core.ports import TaskScheduler

__all__ = ["engine_round", "engine_rounds", "round_outcome"]


def _scheduled_delete(scheduler: TaskScheduler) -> Callable[[int, Callable[[], None]], None]:
    def schedule_delete(delay_ms: int, delete: Callable[[], None]) -> None:
        scheduler.schedule_once("delete-file", delay_ms, delete)

    return schedule_delete


def engine_round(
    engine: CompactionEngine, *, throttle: Callable[[int], None], scheduler: TaskScheduler
) -> CleanFn:
    """The ``CleanFn`` the workers call: clean [first dirty, first uncleanable) of the candidate."""
    schedule_delete = _scheduled_delete(scheduler)

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
        return round_outcome(candidate, result)

    return clean


def engine_rounds(
    engine: CompactionEngine, *, throttle: Callable[[int], None], scheduler: TaskScheduler
) -> CleanManyFn:
    """The ``CleanManyFn`` the workers call for several candidates: one ``engine.clean_many``."""
    schedule_delete = _scheduled_delete(scheduler)

    def clean_many(
        candidates: Sequence[Candidate],
        checks: Sequence[Callable[[], None]],
        worker_id: int,
        on_done: Callable[[int, RoundOutcome | BaseException], None],
    ) -> None:
        def reporter(i: int) -> Callable[[CleaningResult | BaseException], None]:
            def report(ended: CleaningResult | BaseException) -> None:
                on_done(i, ended if isinstance(ended, BaseException) else round_outcome(candidates[i], ended))

            return report

        rounds = [
            LogRound(
                c.log,
                c.to_clean.first_dirty_offset,
                c.to_clean.first_uncleanable_offset,
                check,
                reporter(i),
            )
            for i, (c, check) in enumerate(zip(candidates, checks, strict=True))
        ]
        engine.clean_many(
            rounds, throttle=throttle, schedule_delete=schedule_delete, thread_id=max(worker_id, 0)
        )

    return clean_many


def round_outcome(candidate: Candidate, result: CleaningResult) -> RoundOutcome:
    """A finished round of ``candidate`` as the workers report it."""
    to_clean, stats = candidate.to_clean, result.stats
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
        spilled=stats.spill_classes > 0,
    )

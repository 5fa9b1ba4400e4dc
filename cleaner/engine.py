"""Where a cleaning round's heavy work runs: in this process, or on Spark (``cleaner/spark/``).

Both engines take the same inputs and must produce byte-identical logs (the in-process ``Cleaner`` is the
oracle the Spark engine is tested against). The cleaner's workers call an engine through this protocol
only. ``PerRoundEngine`` picks one of the two for each round by ``log.cleaner.engine`` (``auto``: by the
bytes the round will read, against ``log.cleaner.spark.min.bytes``), and builds the Spark engine (and so
imports pyspark and starts a JVM) only when a round first needs it.

``clean_many`` runs several logs' rounds at once: the Spark engine cleans them in one Spark job (each log
still swapped and reported on its own); the in-process engine simply runs them one after the other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from cleaner.cleaner import Cleaner, CleaningResult, ScheduleDelete, round_down_to_segment
from service.clock import Clock
from service.engine_choice import ENGINE_SPARK, EngineChoice
from service.storage.log import PartitionLog

__all__ = [
    "CompactionEngine",
    "InProcessEngine",
    "LogRound",
    "PerRoundEngine",
    "ScheduleDelete",
    "clean_each",
    "round_bytes",
]


@dataclass(frozen=True, slots=True)
class LogRound:
    """One log's round within ``clean_many``: its range, its own abort check, and where its end goes.

    ``on_done`` is called exactly once, as soon as this log's round is over: with its ``CleaningResult``
    (the log swapped in; the caller checkpoints it) or with the exception that ended it
    (``CleaningAbortedError`` for an abort, anything else for a failure of this log only).
    """

    log: PartitionLog
    first_dirty_offset: int
    upper_bound_offset: int
    check_aborted: Callable[[], None]
    on_done: Callable[[CleaningResult | BaseException], None]


class CompactionEngine(Protocol):
    """One cleaning round of one log over [first dirty, upper bound), swapped in with Kafka's protocol.

    ``check_aborted`` raises ``CleaningAbortedError`` once the round must stop (called between units of
    work; nothing half-done is published); ``throttle(n)`` is told of every n bytes read or written;
    ``schedule_delete(delay_ms, fn)`` removes replaced segment files later (``file.delete.delay.ms``).
    """

    name: str

    def clean(
        self,
        log: PartitionLog,
        first_dirty_offset: int,
        upper_bound_offset: int,
        *,
        check_aborted: Callable[[], None],
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int = 0,
    ) -> CleaningResult: ...

    def clean_many(
        self,
        rounds: Sequence[LogRound],
        *,
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int = 0,
    ) -> None:
        """Every round of ``rounds``, each reported through its ``on_done`` (never raises for one log)."""
        ...

    def close(self) -> None:
        """Release what the engine holds (the SparkSession); called once, at shutdown."""
        ...


def clean_each(
    engine: CompactionEngine,
    rounds: Sequence[LogRound],
    *,
    throttle: Callable[[int], None],
    schedule_delete: ScheduleDelete,
    thread_id: int = 0,
) -> None:
    """``clean_many`` as one round after the other (an engine with nothing to share between logs)."""
    for one in rounds:
        try:
            result = engine.clean(
                one.log,
                one.first_dirty_offset,
                one.upper_bound_offset,
                check_aborted=one.check_aborted,
                throttle=throttle,
                schedule_delete=schedule_delete,
                thread_id=thread_id,
            )
        except Exception as exc:  # this log's failure or abort; the next log still runs
            one.on_done(exc)
        else:
            one.on_done(result)


class InProcessEngine:
    """The ``Cleaner`` (its record loops in C unless ``LOGCLEANER_PURE_PYTHON=1``), on the calling thread."""

    name = "in-process"

    def __init__(self, clock: Clock, *, dedupe_buffer_bytes: int = 134_217_728, load_factor: float = 0.9):
        self.clock = clock
        self.dedupe_buffer_bytes = dedupe_buffer_bytes
        self.load_factor = load_factor

    def clean(
        self,
        log: PartitionLog,
        first_dirty_offset: int,
        upper_bound_offset: int,
        *,
        check_aborted: Callable[[], None],
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int = 0,
    ) -> CleaningResult:
        cleaner = Cleaner(
            clock=self.clock,
            schedule_delete=schedule_delete,
            throttle=throttle,
            check_aborted=check_aborted,
            dedupe_buffer_bytes=self.dedupe_buffer_bytes,
            load_factor=self.load_factor,
            thread_id=thread_id,
        )
        return cleaner.clean(log, first_dirty_offset, upper_bound_offset)

    def clean_many(
        self,
        rounds: Sequence[LogRound],
        *,
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int = 0,
    ) -> None:
        clean_each(self, rounds, throttle=throttle, schedule_delete=schedule_delete, thread_id=thread_id)

    def close(self) -> None:
        return None


def round_bytes(log: PartitionLog, upper_bound_offset: int) -> int:
    """The bytes a round up to ``upper_bound_offset`` reads: every segment below the segment holding it."""
    segments = log.segments
    upper = round_down_to_segment(segments, upper_bound_offset)
    return sum(s.size_bytes for s in segments[:-1] if s.base_offset < upper)


class PerRoundEngine:
    """Runs each round on the engine ``choice`` picks for its size; ``name`` is the setting (``auto`` …).

    ``build_spark`` is called once, at the first round that goes to Spark (under ``_lock``, which guards
    ``_spark``); until then no pyspark import and no JVM. ``close`` stops Spark only if it was started.
    """

    def __init__(
        self,
        choice: EngineChoice,
        in_process: CompactionEngine,
        build_spark: Callable[[], CompactionEngine],
    ) -> None:
        self.choice = choice
        self.name = choice.setting
        self.in_process = in_process
        self._build_spark = build_spark
        self._spark: CompactionEngine | None = None
        self._lock = threading.Lock()

    @property
    def has_started_spark(self) -> bool:
        return self._spark is not None

    def goes_to_spark(self, log: PartitionLog, upper_bound_offset: int) -> bool:
        """Whether a round of ``log`` up to ``upper_bound_offset`` would run on Spark (starts nothing)."""
        engine, _reason = self.choice.choose(round_bytes(log, upper_bound_offset))
        return engine == ENGINE_SPARK

    def engine_for(self, log: PartitionLog, upper_bound_offset: int) -> CompactionEngine:
        if not self.goes_to_spark(log, upper_bound_offset):
            return self.in_process
        with self._lock:
            if self._spark is None:
                self._spark = self._build_spark()
            return self._spark

    def clean(
        self,
        log: PartitionLog,
        first_dirty_offset: int,
        upper_bound_offset: int,
        *,
        check_aborted: Callable[[], None],
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int = 0,
    ) -> CleaningResult:
        engine = self.engine_for(log, upper_bound_offset)
        return engine.clean(
            log,
            first_dirty_offset,
            upper_bound_offset,
            check_aborted=check_aborted,
            throttle=throttle,
            schedule_delete=schedule_delete,
            thread_id=thread_id,
        )

    def clean_many(
        self,
        rounds: Sequence[LogRound],
        *,
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int = 0,
    ) -> None:
        """The rounds that go to Spark in one ``clean_many`` of the Spark engine, the others one by one."""
        on_spark = [r for r in rounds if self.goes_to_spark(r.log, r.upper_bound_offset)]
        others = [r for r in rounds if not any(r is s for s in on_spark)]
        if len(on_spark) == 1:
            others, on_spark = list(rounds), []
        clean_each(self, others, throttle=throttle, schedule_delete=schedule_delete, thread_id=thread_id)
        if on_spark:
            spark = self.engine_for(on_spark[0].log, on_spark[0].upper_bound_offset)
            spark.clean_many(
                on_spark, throttle=throttle, schedule_delete=schedule_delete, thread_id=thread_id
            )

    def close(self) -> None:
        with self._lock:
            spark, self._spark = self._spark, None
        self.in_process.close()
        if spark is not None:
            spark.close()

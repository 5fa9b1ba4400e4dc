"""Where a cleaning round's heavy work runs: in this process, or on Spark (``cleaner/spark/``).

Both engines take the same inputs and must produce byte-identical logs (the in-process ``Cleaner`` is the
oracle the Spark engine is tested against). The cleaner's workers call an engine through this protocol
only. ``PerRoundEngine`` picks one of the two for each round by ``log.cleaner.engine`` (``auto``: by the
bytes the round will read, against ``log.cleaner.spark.min.bytes``), and builds the Spark engine (and so
imports pyspark and starts a JVM) only when a round first needs it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from cleaner.cleaner import Cleaner, CleaningResult, ScheduleDelete, round_down_to_segment
from service.clock import Clock
from service.engine_choice import ENGINE_SPARK, EngineChoice
from service.storage.log import PartitionLog

__all__ = ["CompactionEngine", "InProcessEngine", "PerRoundEngine", "ScheduleDelete", "round_bytes"]


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

    def close(self) -> None:
        """Release what the engine holds (the SparkSession); called once, at shutdown."""
        ...


class InProcessEngine:
    """The pure-Python ``Cleaner``, on the calling thread (``log.cleaner.engine=in-process``)."""

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

    def close(self) -> None:
        return None


def round_bytes(log: PartitionLog, upper_bound_offset: int) -> int:
    """The bytes a round up to ``upper_bound_offset`` reads: every segment below the segment holding it."""
    segments = log.segments
    upper = round_down_to_segment(segments, upper_bound_offset)
    return sum(s.size_bytes for s in segments[:-1] if s.base_offset < upper)


class PerRoundEngine:
    """Runs each round on the engine ``choice`` picks for its size; ``name`` is the setting (``auto`` …).

    ``build_spark`` is called at the first round that goes to Spark; until then no pyspark import and no
    JVM. It runs on its own thread (``logcleaner-spark-start``) while the round keeps calling its abort
    check, so a stop during Spark's start (tens of seconds on a busy machine) does not wait for it; a
    build that fails is tried again by the next round. ``_lock`` guards ``_spark``, ``_starting``,
    ``_start_error`` and ``_closed``. ``close`` stops Spark if it was started (or once its start ends).
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
        self._starting: threading.Thread | None = None
        self._start_error: BaseException | None = None
        self._closed = False
        self._lock = threading.Lock()

    @property
    def has_started_spark(self) -> bool:
        return self._spark is not None

    def engine_for(
        self,
        log: PartitionLog,
        upper_bound_offset: int,
        check_aborted: Callable[[], None] = lambda: None,
        poll_interval_s: float = 0.1,
    ) -> CompactionEngine:
        """The round's engine; while Spark starts, ``check_aborted`` runs every ``poll_interval_s``."""
        engine, _reason = self.choice.choose(round_bytes(log, upper_bound_offset))
        if engine != ENGINE_SPARK:
            return self.in_process
        with self._lock:
            if self._spark is None and self._starting is None:
                self._start_error = None
                self._starting = threading.Thread(
                    target=self._start, name="logcleaner-spark-start", daemon=True
                )
                self._starting.start()
            starting = self._starting
        while starting is not None and starting.is_alive():
            starting.join(poll_interval_s)
            check_aborted()
        with self._lock:
            if self._spark is None:
                raise RuntimeError(f"Spark did not start: {self._start_error!r}") from self._start_error
            return self._spark

    def _start(self) -> None:
        try:
            spark = self._build_spark()
        except BaseException as exc:  # handed to the rounds waiting for it
            with self._lock:
                self._start_error, self._starting = exc, None
            return
        with self._lock:
            closed = self._closed
            if not closed:
                self._spark = spark
            self._starting = None
        if closed:  # the service stopped while Spark started
            spark.close()

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
        engine = self.engine_for(log, upper_bound_offset, check_aborted)
        return engine.clean(
            log,
            first_dirty_offset,
            upper_bound_offset,
            check_aborted=check_aborted,
            throttle=throttle,
            schedule_delete=schedule_delete,
            thread_id=thread_id,
        )

    def close(self) -> None:
        with self._lock:
            spark, self._spark = self._spark, None
            self._closed = True
        self.in_process.close()
        if spark is not None:
            spark.close()

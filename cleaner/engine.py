"""Where a cleaning round's heavy work runs: in this process, or on Spark (``cleaner/spark/``).

Both engines take the same inputs and must produce byte-identical logs (the in-process ``Cleaner`` is the
oracle the Spark engine is tested against). The cleaner's workers call an engine through this protocol
only. ``PerRoundEngine`` picks one of the two for each round by ``log.cleaner.engine`` (``auto``: by the
bytes the round will read, against ``log.cleaner.spark.min.bytes``), and builds the Spark engine (and so
imports pyspark and starts a JVM) only when a round first needs it.

``clean_many`` runs several logs' rounds at once: the Spark engine cleans them in one Spark job (each log
still swapped and reported on its own); the in-process engine simply runs them one after the other.

Spark failing to start (no Java, a master that does not answer) is the engine's fault, not a partition's:
it is logged once, with its cause, the round runs in-process instead, and Spark is tried again only after
``SPARK_RETRY_AFTER_S``; no partition is marked uncleanable for it.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol

from cleaner.compaction.cleaner import Cleaner, CleaningResult, ScheduleDelete, round_down_to_segment
from cleaner.compaction.key_map_budget import KeyMapBudget, remove_spill_leftovers
from cleaner.errors import CleaningAbortedError, EngineUnavailableError
from service.base.clock import Clock
from service.core.engine_choice import ENGINE_SPARK, EngineChoice
from service.storage.log import PartitionLog

__all__ = [
    "CompactionEngine",
    "InProcessEngine",
    "LogRound",
    "PerRoundEngine",
    "ScheduleDelete",
    "clean_each",
    "round_bytes",
    "spark_start_failure",
]

logger = logging.getLogger(__name__)

SPARK_RETRY_AFTER_S = 600.0  # after a failed start, rounds run in-process this long before Spark is tried


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

    def __init__(
        self,
        clock: Clock,
        *,
        dedupe_buffer_bytes: int = 134_217_728,
        load_factor: float = 0.9,
        key_map_budget: KeyMapBudget | None = None,
    ):
        self.clock = clock
        self.dedupe_buffer_bytes = dedupe_buffer_bytes
        self.load_factor = load_factor
        self.key_map_budget = key_map_budget
        if key_map_budget is not None and key_map_budget.spill_dir is not None:
            remove_spill_leftovers(key_map_budget.spill_dir)  # a killed round's, before this one's rounds

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
            key_map_budget=self.key_map_budget,
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
        self._failed_at: float | None = None  # time.monotonic() of the last failed start
        self._closed = False
        self._lock = threading.Lock()

    @property
    def has_started_spark(self) -> bool:
        return self._spark is not None

    def goes_to_spark(self, log: PartitionLog, upper_bound_offset: int) -> bool:
        """Whether a round of ``log`` up to ``upper_bound_offset`` would run on Spark (starts nothing): not
        while Spark's last start failed less than ``SPARK_RETRY_AFTER_S`` ago."""
        engine, _reason = self.choice.choose(round_bytes(log, upper_bound_offset))
        with self._lock:
            failed_at = self._failed_at
        if failed_at is not None and time.monotonic() - failed_at < SPARK_RETRY_AFTER_S:
            return False
        return engine == ENGINE_SPARK

    def engine_for(
        self,
        log: PartitionLog,
        upper_bound_offset: int,
        check_aborted: Callable[[], None] = lambda: None,
        poll_interval_s: float = 0.1,
    ) -> CompactionEngine:
        """The round's engine; while Spark starts, ``check_aborted`` runs every ``poll_interval_s``."""
        if not self.goes_to_spark(log, upper_bound_offset):
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
            if self._spark is not None:
                return self._spark
            error, self._start_error = self._start_error, None
        if error is not None:  # else another round's wait saw the failure first and said so
            self._spark_failed(spark_start_failure(error))
        return self.in_process

    def _spark_failed(self, cause: str) -> None:
        """Spark could not run a round: said once, with its cause; rounds run in-process for a while."""
        with self._lock:
            self._failed_at = time.monotonic()
        logger.error(
            "Spark did not start, so this round and those in the next %d s run in-process: %s",
            SPARK_RETRY_AFTER_S,
            cause,
        )

    def _start(self) -> None:
        try:
            spark = self._build_spark()
        except BaseException as exc:  # handed to the rounds waiting for it
            with self._lock:
                self._start_error, self._starting = exc, None
                self._failed_at = time.monotonic()
            return
        with self._lock:
            self._failed_at = None
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

        def run(on: CompactionEngine) -> CleaningResult:
            return on.clean(
                log,
                first_dirty_offset,
                upper_bound_offset,
                check_aborted=check_aborted,
                throttle=throttle,
                schedule_delete=schedule_delete,
                thread_id=thread_id,
            )

        if engine is not self.in_process:
            try:
                return self._observed(run(engine))
            except EngineUnavailableError as exc:
                self._spark_failed(str(exc))
        return self._observed(run(self.in_process))

    def _observed(self, result: CleaningResult) -> CleaningResult:
        """``result``, its speed taught to ``auto``'s estimates (``EngineRates``)."""
        stats = result.stats
        cores = max(self.choice.cluster_cores, 1)
        self.choice.rates.observe(result.engine, stats.bytes_read, stats.elapsed_ms / 1000, cores=cores)
        return result

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
        if not on_spark:
            return
        try:  # the start ends early only once every one of these rounds was aborted (a stop)
            spark = self.engine_for(
                on_spark[0].log, on_spark[0].upper_bound_offset, partial(_check_all_aborted, on_spark)
            )
        except CleaningAbortedError as exc:
            for one in on_spark:
                one.on_done(exc)
            return
        done: set[int] = set()  # ids of the rounds Spark answered

        def tracked(one: LogRound) -> LogRound:
            def on_done(outcome: CleaningResult | BaseException) -> None:
                done.add(id(one))
                one.on_done(self._observed(outcome) if isinstance(outcome, CleaningResult) else outcome)

            return replace(one, on_done=on_done)

        if spark is not self.in_process:
            try:
                spark.clean_many(
                    [tracked(r) for r in on_spark],
                    throttle=throttle,
                    schedule_delete=schedule_delete,
                    thread_id=thread_id,
                )
                return
            except EngineUnavailableError as exc:
                self._spark_failed(str(exc))
        left = [r for r in on_spark if id(r) not in done]  # Spark did not start: they run here, one by one
        clean_each(
            self.in_process, left, throttle=throttle, schedule_delete=schedule_delete, thread_id=thread_id
        )

    def close(self) -> None:
        with self._lock:
            spark, self._spark = self._spark, None
            self._closed = True
        self.in_process.close()
        if spark is not None:
            spark.close()


def spark_start_failure(error: BaseException) -> str:
    """One line naming why Spark did not start: a missing Java is named as such."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if "JAVA_GATEWAY_EXITED" in str(error) or isinstance(error, FileNotFoundError):
        java_home = os.environ.get("JAVA_HOME")
        if shutil.which("java") is None and not java_home:
            return "no Java: java is not on PATH and JAVA_HOME is unset (Spark needs Java 17 or later)"
        return f"its JVM exited at once (Java at {java_home or shutil.which('java')}): {text}"
    if type(error).__name__ == "Py4JJavaError":  # the JVM ran, but no SparkContext came of it
        return (
            "the SparkSession could not be created: is the master up and reachable from here? (the "
            "cleaner.spark.jvm lines above say what Spark met)"
        )
    return f"{type(error).__name__}: {text}"


def _check_all_aborted(rounds: Sequence[LogRound]) -> None:
    """Raise the first round's abort once every round of ``rounds`` was aborted."""
    errors: list[CleaningAbortedError] = []
    for one in rounds:
        try:
            one.check_aborted()
        except CleaningAbortedError as exc:
            errors.append(exc)
    if len(errors) == len(rounds):
        raise errors[0]

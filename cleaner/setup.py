"""Builds the log cleaner from the broker configuration (the daemon and ``logcleaner clean`` share it)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from cleaner.engine import CompactionEngine, InProcessEngine, PerRoundEngine
from cleaner.log_cleaner import LogCleaner
from cleaner.manager import CleanerManager
from cleaner.round import engine_round, engine_rounds
from cleaner.throttler import Throttler
from cleaner.worker import JobSharing
from service.clock import Clock
from service.config.broker_config import BrokerConfig
from service.engine_choice import EngineChoice
from service.log_manager import LogManager
from service.ports import TaskScheduler

__all__ = ["build_engine", "build_log_cleaner"]


def build_engine(
    broker: BrokerConfig, clock: Clock, *, on_spark_job: Callable[[float], None] | None = None
) -> PerRoundEngine:
    """``log.cleaner.engine`` per round: in-process, or Spark (built, and pyspark imported, at the first
    round that goes to Spark: with ``auto`` only rounds of ``log.cleaner.spark.min.bytes`` or more)."""
    in_process = InProcessEngine(
        clock,
        dedupe_buffer_bytes=broker.log_cleaner_dedupe_buffer_size,
        load_factor=broker.log_cleaner_io_buffer_load_factor,
    )

    def build_spark() -> CompactionEngine:
        from cleaner.spark.engine import SparkEngine  # pyspark is imported only when a round needs it

        return SparkEngine(
            clock=clock,
            spark_conf=broker.spark_conf,
            dedupe_buffer_bytes=broker.log_cleaner_dedupe_buffer_size,
            load_factor=broker.log_cleaner_io_buffer_load_factor,
            on_job=on_spark_job,
        )

    return PerRoundEngine(EngineChoice.of(broker), in_process, build_spark)


def build_log_cleaner(
    broker: BrokerConfig,
    log_manager: LogManager,
    engine: CompactionEngine,
    *,
    scheduler: TaskScheduler,
    threads: int | None = None,
    on_round: Callable[[str, float], None] | None = None,
) -> LogCleaner:
    """The pool of ``log.cleaner.threads`` workers; it becomes the LogManager's cleaning port.
    ``on_round(engine, seconds)`` hears of every finished round (the metrics' round-duration histogram)."""
    manager = CleanerManager(lambda: log_manager.logs, log_manager.clock, log_manager.unmanaged_in)
    stop = threading.Event()  # a stop ends a throttling pause at once (a Spark round's can be long)

    def pause(seconds: float) -> None:
        stop.wait(seconds)

    throttler = Throttler(broker.log_cleaner_io_max_bytes_per_second, sleep=pause)
    sharing = None
    if isinstance(engine, PerRoundEngine) and engine.choice.may_use_spark:
        per_round = engine
        sharing = JobSharing(
            max_logs=broker.log_cleaner_spark_max_logs_per_job,
            shares_job=lambda c: per_round.goes_to_spark(c.log, c.to_clean.first_uncleanable_offset),
            clean_many=engine_rounds(engine, throttle=throttler.maybe_throttle, scheduler=scheduler),
        )
    cleaner = LogCleaner(
        manager,
        engine_round(engine, throttle=throttler.maybe_throttle, scheduler=scheduler),
        log_manager.cleanup_compacted_log,
        threads=broker.log_cleaner_threads if threads is None else threads,
        backoff_ms=broker.log_cleaner_backoff_ms,
        engine_name=engine.name,
        on_round=on_round,
        sharing=sharing,
        stop=stop,
    )
    log_manager.cleaning = manager
    return cleaner

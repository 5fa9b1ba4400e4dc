"""The composition root: a logcleaner process's parts, built from its configuration and wired here only.

``serve`` builds the node (``build_node``): the broker config and the metadata log, then the scheduler
(its outcomes feed the metrics), the LogManager, and once the logs loaded the compaction engine and the
cleaner (the LogManager's cleaning port, as Kafka's LogManager owns its LogCleaner), then the API over
them. The offline commands build the narrower sets they need from the same functions: a LogManager for
every inspection, an engine and a worker-less cleaner for ``logcleaner clean``. The cleaner, the scheduler
and the API are imported only by the functions that build them, so an inspection imports none of them and
starts fast.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from service.clock import Clock, SystemClock
from service.config.broker_config import BrokerConfig
from service.config.config_layers import NO_DYNAMIC_CONFIGS
from service.config.topic_config import effective_log_config
from service.config.topic_store import TopicConfigStore
from service.engine_choice import EngineChoice
from service.log_manager import LogManager, LogManagerSettings
from service.metadata.source import MetadataSource
from service.ports import CleanerView, CleaningControl, TaskScheduler
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.log_dir import PartitionCopier
from service.storage.topic_partition import TopicPartition
from service.tasks import DeferredTasks

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from api.deps import JobsView, LogService
    from api.metrics.service_metrics import ServiceMetrics
    from api.metrics.source import MetricsSource
    from api.server import ApiServer
    from cleaner.engine import CompactionEngine, PerRoundEngine
    from cleaner.log_cleaner import LogCleaner
    from cleaner.manager import CleanerManager
    from scheduler.log_scheduler import LogScheduler

__all__ = [
    "Node",
    "NodeView",
    "build_api_server",
    "build_compacted_log_manager",
    "build_engine",
    "build_log_cleaner",
    "build_log_manager",
    "build_metrics",
    "build_node",
    "build_offline_compacted_log_manager",
    "build_offline_log_manager",
    "build_scheduler",
    "load_metadata",
]


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the API (``LogService``) and the metrics (``MetricsSource``) reach of a running node: its parts,
    never the daemon that runs it. The cleaner is read through ``cleaner`` at each call: it is built only
    once the logs loaded, and not at all with ``log.cleaner.enable=false``."""

    broker: BrokerConfig
    log_manager: LogManager
    topic_store: TopicConfigStore
    metadata: MetadataSource
    scheduler: JobsView
    cleaner: Callable[[], CleanerView | None]
    refresh: Callable[[], None]

    @property
    def cleaner_view(self) -> CleanerView | None:
        return self.cleaner()

    def refresh_topic_configs(self) -> None:
        """Apply changed topic overrides to the live logs."""
        self.refresh()


@dataclass(frozen=True, slots=True)
class Node:
    """``serve``'s parts built before start-up; the engine, the cleaner's workers and the API follow once
    the logs loaded (``build_engine``, ``build_log_cleaner``, ``build_api_server``)."""

    topic_store: TopicConfigStore
    metadata: MetadataSource
    scheduler: LogScheduler
    log_manager: LogManager
    cleaning: CleanerManager | None  # with log.cleaner.enable: the LogManager's cleaning port


def build_node(
    broker: BrokerConfig, clock: Clock, *, on_job_outcome: Callable[[str, str, float], None] | None = None
) -> Node:
    """The metadata log is read before anything binds or locks (unreadable: exit 2); the LogManager takes
    the stray replicas' verdict from it. ``on_job_outcome`` feeds the metrics."""
    topic_store = TopicConfigStore(list(broker.log_dir_paths))
    metadata = load_metadata(broker)
    scheduler = build_scheduler(broker, clock, on_outcome=on_job_outcome)
    cleaning: CleanerManager | None = None
    if broker.log_cleaner_enable:
        log_manager, cleaning = build_compacted_log_manager(
            broker, topic_store, metadata=metadata, clock=clock, scheduler=scheduler
        )
    else:
        log_manager = build_log_manager(
            broker, topic_store, metadata=metadata, clock=clock, scheduler=scheduler
        )
    return Node(topic_store, metadata, scheduler, log_manager, cleaning)


def load_metadata(broker: BrokerConfig) -> MetadataSource:
    """The broker's metadata log, read now: unreadable metadata stops the start or the command (exit 2),
    never a silent fall back to the broker defaults."""
    metadata = MetadataSource(broker)
    metadata.load()
    return metadata


def build_log_manager(
    broker: BrokerConfig,
    store: TopicConfigStore,
    *,
    metadata: MetadataSource | None = None,
    clock: Clock,
    scheduler: TaskScheduler,
    read_only: PartitionCopier | None = None,
    cleaning: CleaningControl | None = None,
) -> LogManager:
    """The LogManager with effective per-topic configs: logcleaner's override, else the metadata log's
    (``metadata``, read at each call: a reload applies at once), else broker value, else default;
    ``read_only`` for an inspection's (``LogManager``). A loaded ``metadata`` is also the authority on
    stray replicas (Kafka's ``isStrayKraftReplica``), as of when this is called."""

    def config_for(topic: str) -> LogConfig:
        dynamic = metadata.dynamic_configs if metadata is not None else NO_DYNAMIC_CONFIGS
        return effective_log_config(broker, store.get(topic), topic=topic, dynamic=dynamic)

    return LogManager(
        broker.log_dir_paths,
        config_for,
        clock=clock,
        scheduler=scheduler,
        settings=LogManagerSettings(
            recovery_threads_per_dir=broker.num_recovery_threads_per_data_dir,
            cleaner_enabled=broker.log_cleaner_enable,
            log_segment_delete_delay_ms=broker.log_segment_delete_delay_ms,
        ),
        read_only=read_only,
        known_topics=metadata.known_topics() if metadata is not None else None,
        cleaning=cleaning,
    )


def build_compacted_log_manager(
    broker: BrokerConfig,
    store: TopicConfigStore,
    *,
    metadata: MetadataSource | None = None,
    clock: Clock,
    scheduler: TaskScheduler,
) -> tuple[LogManager, CleanerManager]:
    """A LogManager (``build_log_manager``) whose cleaning port is the returned ``CleanerManager``, the
    cleaner's state of the compacted logs; it reads the LogManager's live logs at each selection."""
    from cleaner.manager import CleanerManager

    def logs() -> dict[TopicPartition, PartitionLog]:
        return log_manager.logs

    def unmanaged(log_dir: Path) -> Collection[TopicPartition]:
        return log_manager.unmanaged_in(log_dir)

    cleaning = CleanerManager(logs, clock, unmanaged)
    log_manager = build_log_manager(
        broker, store, metadata=metadata, clock=clock, scheduler=scheduler, cleaning=cleaning
    )
    return log_manager, cleaning


def build_offline_log_manager(
    broker: BrokerConfig, *, read_only: PartitionCopier | None = None
) -> tuple[LogManager, DeferredTasks]:
    """An offline command's LogManager (not loaded yet) and the tasks it schedules, which the command runs
    before it exits instead of on a scheduler; ``read_only`` for an inspection's."""
    tasks = DeferredTasks()
    store = TopicConfigStore(list(broker.log_dir_paths))
    manager = build_log_manager(
        broker,
        store,
        metadata=load_metadata(broker),
        clock=SystemClock(),
        scheduler=tasks,
        read_only=read_only,
    )
    return manager, tasks


def build_offline_compacted_log_manager(
    broker: BrokerConfig,
) -> tuple[LogManager, CleanerManager, DeferredTasks]:
    """``build_offline_log_manager``'s, with the cleaner's ``CleanerManager`` as its cleaning port
    (``logcleaner clean``)."""
    tasks = DeferredTasks()
    store = TopicConfigStore(list(broker.log_dir_paths))
    metadata = load_metadata(broker)
    manager, cleaning = build_compacted_log_manager(
        broker, store, metadata=metadata, clock=SystemClock(), scheduler=tasks
    )
    return manager, cleaning, tasks


def build_scheduler(
    broker: BrokerConfig, clock: Clock, *, on_outcome: Callable[[str, str, float], None] | None = None
) -> LogScheduler:
    """Kafka's ``KafkaScheduler`` for the periodic log tasks; ``on_outcome`` feeds the metrics."""
    from scheduler.log_scheduler import LogScheduler

    return LogScheduler(clock, initial_delay_ms=broker.scheduler_initial_delay_ms, on_outcome=on_outcome)


def build_metrics(source: MetricsSource) -> ServiceMetrics:
    """The Prometheus metrics of ``serve``, reading ``source`` (a ``NodeView``) at each scrape."""
    from api.metrics.service_metrics import ServiceMetrics

    return ServiceMetrics(source)


def build_engine(
    broker: BrokerConfig, clock: Clock, *, on_spark_job: Callable[[float], None] | None = None
) -> PerRoundEngine:
    """``log.cleaner.engine`` per round: in-process, or Spark (built, and pyspark imported, at the first
    round that goes to Spark: with ``auto`` only rounds of ``log.cleaner.spark.min.bytes`` or more)."""
    from cleaner.engine import InProcessEngine, PerRoundEngine

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
    cleaning: CleanerManager,
    engine: CompactionEngine,
    *,
    scheduler: TaskScheduler,
    threads: int | None = None,
    on_round: Callable[[str, float], None] | None = None,
) -> LogCleaner:
    """The pool of ``log.cleaner.threads`` workers over ``cleaning`` (``build_compacted_log_manager``'s).
    ``on_round(engine, seconds)`` hears of every finished round (the metrics' round-duration histogram)."""
    from cleaner.engine import PerRoundEngine
    from cleaner.log_cleaner import LogCleaner
    from cleaner.round import engine_round, engine_rounds
    from cleaner.throttler import Throttler
    from cleaner.worker import JobSharing

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
    return LogCleaner(
        cleaning,
        engine_round(engine, throttle=throttler.maybe_throttle, scheduler=scheduler),
        log_manager.cleanup_compacted_log,
        threads=broker.log_cleaner_threads if threads is None else threads,
        backoff_ms=broker.log_cleaner_backoff_ms,
        engine_name=engine.name,
        on_round=on_round,
        sharing=sharing,
        stop=stop,
    )


def build_api_server(
    broker: BrokerConfig,
    service: LogService,
    registry: CollectorRegistry,
    *,
    not_ready: Callable[[], str | None],
) -> ApiServer:
    """The REST API over ``service`` on ``api.host``:``api.port`` (not yet bound), with the ``api.*`` settings
    (the token read from ``api.auth.token.file``, which must be readable and non-empty); ``/metrics`` serves
    ``registry``; ``not_ready()`` makes ``/readyz`` and ``/v1`` answer 503 while it gives a reason."""
    from api.app import create_app
    from api.auth import read_token_file
    from api.deps import ApiSettings
    from api.server import ApiServer

    token_file = broker.api_auth_token_file
    settings = ApiSettings.from_broker(broker, auth_token=read_token_file(token_file) if token_file else None)
    app = create_app(service, registry, settings=settings, not_ready=not_ready)
    return ApiServer(app, host=broker.api_host, port=broker.api_port)

"""The composition root: a logcleaner process's parts, built from its configuration and wired here only.

``serve``'s daemon (``service.shell.daemon``) builds nothing itself; it runs, in its start-up order, what
these functions build:

- ``build_node``, before start-up: the topic overrides' store, the broker's metadata log (read now), the
  scheduler (Kafka's ``KafkaScheduler``; its outcomes feed the metrics), the LogManager with its
  collaborators passed to its constructor (with ``log.cleaner.enable`` its cleaning port, the cleaner's
  ``CleanerManager``, as Kafka's LogManager owns its LogCleaner), the ``NodeView`` the API and the metrics
  read, and the metrics over it;
- ``build_api_server``, bound by the daemon before the logs load: the REST API over the ``NodeView``,
  with its ``ApiSettings`` built from the broker config (``build_api_settings``);
- once the logs loaded, ``build_cleaner_parts``: the compaction engine and the cleaner's workers (with
  ``log.cleaner.enable``), and ``schedule_log_tasks``: Kafka's periodic log tasks on the scheduler, as
  Kafka's ``LogManager.startup`` schedules them. Neither starts anything: the daemon starts the
  scheduler, then the cleaner.

The daemon hands in only its own callbacks: where its cleaner is (the ``NodeView`` reads it at each call),
its topic-config refresh, and why it is not ready (``/readyz``). The API and the metrics receive narrow
objects (``api.deps.LogService``, ``api.metrics.source.MetricsSource``: the ``NodeView``), never the
daemon.

The offline commands (``service.shell.tools``) build the narrower sets they need from the same functions: a
LogManager for every inspection (``build_offline_log_manager``), and for ``logcleaner clean`` one with the
cleaner's ``CleanerManager`` (``build_offline_compacted_log_manager``), an engine and a worker-less
cleaner (``build_engine``, ``build_log_cleaner``), and for ``logcleaner topic-config`` the topic overrides'
store (``build_topic_store``). Nothing outside this module constructs a LogManager, a cleaner, an engine, a
scheduler, the metadata, the metrics or the API (``tests/service/shell/test_node.py``). The
cleaner, the scheduler and the API are imported only by the functions that build them, so an inspection
imports none of them and starts fast.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from service.base.clock import Clock, SystemClock
from service.config.broker_config import BrokerConfig
from service.config.config_layers import NO_DYNAMIC_CONFIGS
from service.config.topic_config import effective_log_config
from service.config.topic_store import TopicConfigStore
from service.core.engine_choice import EngineChoice
from service.core.log_manager import LogManager, LogManagerSettings
from service.core.partition_figures import PartitionFigures
from service.core.ports import CleanerView, CleaningControl, LogQueries, PartitionScrapes, TaskScheduler
from service.core.queries import LogManagerQueries
from service.core.summary_cache import SUMMARY_REFRESH_MS, BrokerSummary
from service.core.tasks import DeferredTasks
from service.metadata.source import MetadataSource
from service.storage.log import PartitionLog
from service.storage.log_config import LONG_MAX, LogConfig
from service.storage.log_dir import PartitionCopier
from service.storage.topic_partition import TopicPartition

if TYPE_CHECKING:
    from api.deps import ApiSettings, JobsView
    from api.metrics.service_metrics import ServiceMetrics
    from api.metrics.source import MetricsSource
    from api.server import ApiServer
    from cleaner.engine import CompactionEngine, PerRoundEngine
    from cleaner.pool.log_cleaner import LogCleaner
    from cleaner.pool.manager import CleanerManager
    from scheduler.log_scheduler import LogScheduler

__all__ = [
    "TOPIC_CONFIG_REFRESH_MS",
    "CleanerParts",
    "Node",
    "NodeView",
    "build_api_server",
    "build_api_settings",
    "build_cleaner_parts",
    "build_compacted_log_manager",
    "build_engine",
    "build_log_cleaner",
    "build_log_manager",
    "build_metrics",
    "build_node",
    "build_offline_compacted_log_manager",
    "build_offline_log_manager",
    "build_scheduler",
    "build_topic_store",
    "load_metadata",
    "schedule_log_tasks",
]

# How often the daemon looks for topic overrides changed by another process (a few stat calls a run).
TOPIC_CONFIG_REFRESH_MS = 500


@dataclass(frozen=True, slots=True)
class NodeView:
    """What the API (``LogService``) and the metrics (``MetricsSource``) reach of a running node: its parts,
    never the daemon that runs it. The API reads the logs through ``logs`` (the core's port, over the
    LogManager, the topic store and the metadata); the metrics read the LogManager's figures. The cleaner
    is read through ``cleaner`` at each call: it is built only once the logs loaded, and not at all with
    ``log.cleaner.enable=false``."""

    broker: BrokerConfig
    log_manager: LogManager
    topic_store: TopicConfigStore
    metadata: MetadataSource
    scheduler: JobsView
    cleaner: Callable[[], CleanerView | None]
    refresh: Callable[[], None]
    summary: BrokerSummary  # the whole-broker summary, refreshed by its scheduled task
    logs: LogQueries
    partition_figures: PartitionScrapes  # the metrics' per-partition figures, one scrape at a time

    @property
    def cleaner_view(self) -> CleanerView | None:
        return self.cleaner()

    @property
    def explain_summary(self) -> BrokerSummary:
        return self.summary

    def refresh_topic_configs(self) -> None:
        """Apply changed topic overrides to the live logs."""
        self.refresh()


@dataclass(frozen=True, slots=True)
class Node:
    """``serve``'s parts built before start-up (``build_node``). The API server (``build_api_server``), and
    once the logs loaded the engine and the cleaner's workers (``build_cleaner_parts``) and the periodic
    tasks (``schedule_log_tasks``), are built from it; the daemon runs them."""

    broker: BrokerConfig
    clock: Clock
    topic_store: TopicConfigStore
    metadata: MetadataSource
    scheduler: LogScheduler
    log_manager: LogManager
    cleaning: CleanerManager | None  # with log.cleaner.enable: the LogManager's cleaning port
    view: NodeView  # what the API and the metrics see of the node
    metrics: ServiceMetrics


@dataclass(frozen=True, slots=True)
class CleanerParts:
    """The cleaner of ``serve`` (``build_cleaner_parts``): its engine and its pool of workers, not started."""

    engine: PerRoundEngine
    cleaner: LogCleaner


def build_node(
    broker: BrokerConfig,
    clock: Clock,
    *,
    cleaner: Callable[[], CleanerView | None],
    refresh_topic_configs: Callable[[], None],
) -> Node:
    """The metadata log is read before anything binds or locks (unreadable: exit 2); the LogManager takes
    the stray replicas' verdict from it. The daemon's own callbacks: ``cleaner()``, its cleaner once built
    (the ``NodeView`` reads it at each call), and ``refresh_topic_configs()``, which applies changed topic
    configs to the live logs (the API's config changes, the periodic refresh)."""

    def on_job_outcome(job: str, outcome: str, seconds: float) -> None:
        metrics.on_job_outcome(job, outcome, seconds)  # built below: the scheduler runs nothing before then

    topic_store = build_topic_store(broker)
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
    summary = BrokerSummary(
        log_manager, cleaner_enabled=broker.log_cleaner_enable, uncleanable=partial(_uncleanable, cleaner)
    )
    view = NodeView(
        broker,
        log_manager,
        topic_store,
        metadata,
        scheduler,
        cleaner=cleaner,
        refresh=refresh_topic_configs,
        summary=summary,
        logs=LogManagerQueries(broker, log_manager, topic_store, metadata, refresh=refresh_topic_configs),
        partition_figures=PartitionFigures(log_manager),
    )
    metrics = build_metrics(view)  # reads the parts at each scrape, not now
    return Node(broker, clock, topic_store, metadata, scheduler, log_manager, cleaning, view, metrics)


def _uncleanable(cleaner: Callable[[], CleanerView | None]) -> list[TopicPartition]:
    """The partitions the cleaner marked uncleanable now, as ``GET /v1/cleaner`` lists them."""
    view = cleaner()
    entries = view.status().get("uncleanable") if view is not None else None
    if not isinstance(entries, list):
        return []
    return [
        TopicPartition(str(e["topic"]), int(e["partition"]))
        for e in entries
        if isinstance(e, dict) and "topic" in e and "partition" in e
    ]


def build_topic_store(broker: BrokerConfig) -> TopicConfigStore:
    """logcleaner's topic overrides, kept in every log dir (not read yet)."""
    return TopicConfigStore(list(broker.log_dir_paths))


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
    (``metadata``, read at each call: a reload applies at once), else broker value, else default (a topic
    whose own configs the metadata says are unknown is held: ``MetadataSource.topic_configs_unknown``);
    ``read_only`` for an inspection's (``LogManager``). A loaded ``metadata`` is also the authority on
    stray replicas (Kafka's ``isStrayKraftReplica``), as of when this is called."""

    def config_for(topic: str) -> LogConfig:
        dynamic = metadata.dynamic_configs if metadata is not None else NO_DYNAMIC_CONFIGS
        overrides = store.get(topic)
        unknown = metadata is not None and metadata.topic_configs_unknown(
            topic, known_to_logcleaner=store.has(topic)
        )
        return effective_log_config(broker, overrides, topic=topic, dynamic=dynamic, configs_unknown=unknown)

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
    from cleaner.pool.manager import CleanerManager

    def logs() -> dict[TopicPartition, PartitionLog]:
        return log_manager.logs

    def unmanaged(log_dir: Path) -> Collection[TopicPartition]:
        return log_manager.unmanaged_in(log_dir)

    cleaning = CleanerManager(
        logs,
        clock,
        unmanaged,
        uncleanable_retry_backoff_ms=broker.log_cleaner_uncleanable_retry_backoff_ms,
    )
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
    store = build_topic_store(broker)
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
    store = build_topic_store(broker)
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
    from cleaner.compaction.key_map_budget import KeyMapBudget
    from cleaner.engine import InProcessEngine, PerRoundEngine

    budget = KeyMapBudget.of(
        broker.log_cleaner_dedupe_buffer_size, broker.log_cleaner_threads, broker.log_cleaner_spill_dir
    )
    in_process = InProcessEngine(
        clock,
        dedupe_buffer_bytes=broker.log_cleaner_dedupe_buffer_size,
        load_factor=broker.log_cleaner_io_buffer_load_factor,
        key_map_budget=budget,
    )

    def build_spark() -> CompactionEngine:
        from cleaner.spark.engine import SparkEngine  # pyspark is imported only when a round needs it

        return SparkEngine(
            clock=clock,
            spark_conf=broker.spark_conf,
            dedupe_buffer_bytes=broker.log_cleaner_dedupe_buffer_size,
            load_factor=broker.log_cleaner_io_buffer_load_factor,
            on_job=on_spark_job,
            key_map_budget=budget,  # each task's key map within its thread's share
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
    from cleaner.pool.log_cleaner import LogCleaner
    from cleaner.pool.round import engine_round, engine_rounds
    from cleaner.pool.throttler import Throttler
    from cleaner.pool.worker import JobSharing

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


def build_cleaner_parts(node: Node) -> CleanerParts | None:
    """``serve``'s cleaner, built once the logs loaded (with ``log.cleaner.enable``, else None): the engine
    (``build_engine``) and the ``log.cleaner.threads`` workers over the node's ``CleanerManager``
    (``build_log_cleaner``), both reporting to the metrics. Nothing starts."""
    if node.cleaning is None:
        return None
    engine = build_engine(node.broker, node.clock, on_spark_job=node.metrics.observe_spark_job)
    cleaner = build_log_cleaner(
        node.broker,
        node.log_manager,
        node.cleaning,
        engine,
        scheduler=node.scheduler,
        on_round=node.metrics.observe_cleaner_round,
    )
    return CleanerParts(engine, cleaner)


def schedule_log_tasks(node: Node) -> None:
    """Kafka's periodic log tasks on the node's scheduler, as Kafka's ``LogManager.startup`` schedules them,
    and logcleaner's topic-config refresh; the metrics learn their names. They run once the scheduler
    starts, after ``scheduler.initial.delay.ms``."""
    broker, manager, scheduler = node.broker, node.log_manager, node.scheduler
    refresh = node.view.refresh_topic_configs

    def retention() -> None:
        refresh()  # a retention run applies changed configs first
        manager.cleanup_logs()

    scheduler.add_periodic("kafka-log-retention", broker.log_retention_check_interval_ms, retention)
    scheduler.add_periodic(
        "kafka-log-flusher", broker.log_flush_scheduler_interval_ms, manager.flush_dirty_logs
    )
    scheduler.add_periodic(
        "kafka-recovery-point-checkpoint",
        broker.log_flush_offset_checkpoint_interval_ms,
        manager.checkpoint_recovery_points,
    )
    scheduler.add_periodic(
        "kafka-log-start-offset-checkpoint",
        broker.log_flush_start_offset_checkpoint_interval_ms,
        manager.checkpoint_log_start_offsets,
    )
    # The replica manager's task (a period of 0 or less: once, as Kafka's scheduler runs it). It starts
    # after the initial delay like the others, not at once as Kafka's: until then the file on disk is
    # the one loaded, which holds no high watermark above the logs' own.
    hw_period = broker.replica_high_watermark_checkpoint_interval_ms
    scheduler.add_periodic(
        "highwatermark-checkpoint",
        hw_period if hw_period > 0 else LONG_MAX,
        manager.checkpoint_high_watermarks,
    )
    scheduler.add_self_rescheduling("kafka-delete-logs", manager.delete_logs)
    scheduler.add_periodic(
        "kafka-producer-expiration",
        broker.producer_id_expiration_check_interval_ms,
        lambda: manager.remove_expired_producers(broker.producer_id_expiration_ms),
    )
    # A change by `logcleaner topic-config` reaches the live logs within a second.
    scheduler.add_periodic(
        "logcleaner-topic-config-refresh",
        TOPIC_CONFIG_REFRESH_MS,
        refresh,
        initial_delay_ms=TOPIC_CONFIG_REFRESH_MS,
    )
    # The whole-broker summary follows rolls, retention and cleaning rounds within one period; its first
    # document is built at once, so that the first request finds it ready (or nearly).
    scheduler.add_periodic(
        "logcleaner-explain-summary", SUMMARY_REFRESH_MS, node.view.summary.refresh, initial_delay_ms=0
    )
    node.metrics.declare_jobs(job.name for job in scheduler.jobs())


def build_api_settings(broker: BrokerConfig) -> ApiSettings:
    """The API's ``api.*`` settings, the token read from ``api.auth.token.file`` (which must be readable and
    non-empty)."""
    from api.auth import read_token_file
    from api.deps import ApiSettings

    token_file = broker.api_auth_token_file
    return ApiSettings.from_broker(broker, auth_token=read_token_file(token_file) if token_file else None)


def build_api_server(node: Node, *, not_ready: Callable[[], str | None]) -> ApiServer:
    """The REST API over the node's ``NodeView`` on ``api.host``:``api.port`` (not yet bound), with
    ``build_api_settings``'s; ``/metrics`` serves the node's metrics; ``not_ready()`` (the daemon's
    start-up and stop) makes ``/readyz`` and ``/v1`` answer 503 while it gives a reason."""
    from api.app import create_app
    from api.server import ApiServer

    settings = build_api_settings(node.broker)
    app = create_app(
        node.view,
        node.metrics.registry,
        settings=settings,
        not_ready=not_ready,
        on_fetch_fault=node.metrics.fetch_faults.record,
    )
    return ApiServer(app, host=node.broker.api_host, port=node.broker.api_port)

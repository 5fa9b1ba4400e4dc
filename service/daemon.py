"""The composition root of the long-running service: configuration, the LogManager, the scheduler.

Start-up: topic overrides are read, every log dir is locked and loaded (the LogManager), then Kafka's
periodic log tasks start after ``scheduler.initial.delay.ms``. SIGTERM/SIGINT: the scheduler stops (runs
in flight finish), every log is flushed and closed, both checkpoints and the clean-shutdown marker are
written, and the process exits 0.

With ``log.cleaner.enable``, ``log.cleaner.threads`` cleaner workers (``kafka-log-cleaner-thread-N``)
compact the dirtiest logs on the chosen engine and run the retention of compacted logs; they stop before
the logs are closed. Topic overrides changed by another process are picked up every
``log.cleaner.backoff.ms`` (``logcleaner-topic-config-refresh``) and at each retention run.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType

from fastapi import FastAPI

from api.app import create_app
from api.metrics.service_metrics import ServiceMetrics
from api.server import ApiServer
from cleaner.engine import CompactionEngine
from cleaner.log_cleaner import LogCleaner
from cleaner.setup import build_engine, build_log_cleaner
from scheduler.log_scheduler import LogScheduler
from service.clock import Clock, SystemClock
from service.config.broker_config import BrokerConfig
from service.config.topic_config import effective_log_config
from service.config.topic_store import TopicConfigStore
from service.log_manager import LogManager, LogManagerSettings
from service.ports import CleanerView, TaskScheduler
from service.storage.log_config import LogConfig

__all__ = ["Daemon", "build_log_manager"]

logger = logging.getLogger(__name__)


def build_log_manager(
    broker: BrokerConfig, store: TopicConfigStore, *, clock: Clock, scheduler: TaskScheduler
) -> LogManager:
    """The LogManager with effective per-topic configs: topic override, else broker value, else default."""

    def config_for(topic: str) -> LogConfig:
        return effective_log_config(broker, store.get(topic))

    return LogManager(
        [Path(d) for d in broker.log_dirs],
        config_for,
        clock=clock,
        scheduler=scheduler,
        settings=LogManagerSettings(
            recovery_threads_per_dir=broker.num_recovery_threads_per_data_dir,
            cleaner_enabled=broker.log_cleaner_enable,
            log_segment_delete_delay_ms=broker.log_segment_delete_delay_ms,
        ),
    )


class Daemon:
    """Owns the scheduler, the LogManager and the stop event (``_stop``, the only cross-thread state)."""

    def __init__(self, broker: BrokerConfig, *, clock: Clock | None = None) -> None:
        self.broker = broker
        self.clock = clock or SystemClock()
        self.topic_store = TopicConfigStore([Path(d) for d in broker.log_dirs])
        self.metrics = ServiceMetrics(self)  # reads this daemon's parts at each scrape, not now
        self.metrics_registry = self.metrics.registry
        self.scheduler = LogScheduler(
            self.clock,
            initial_delay_ms=broker.scheduler_initial_delay_ms,
            on_outcome=self.metrics.on_job_outcome,
        )
        self.log_manager = build_log_manager(
            broker, self.topic_store, clock=self.clock, scheduler=self.scheduler
        )
        self._stop = threading.Event()
        self._config_version = 0
        self.engine: CompactionEngine | None = None
        self.cleaner: LogCleaner | None = None
        self.api_server: ApiServer | None = None

    def start(self) -> None:
        app = create_app(self, self.metrics_registry)  # first: a bad api.* setting stops start-up at once
        for path in self.log_manager.log_dirs:
            path.mkdir(parents=True, exist_ok=True)
        self.topic_store.load()
        self._config_version = self.topic_store.version
        self.log_manager.startup()
        try:
            self._start_services(app)
        except BaseException:
            logger.error("Start-up failed after the logs were loaded: shutting down cleanly")
            self.shutdown()
            raise

    def _start_services(self, app: FastAPI) -> None:
        if self.broker.log_cleaner_enable:
            self.engine = build_engine(self.broker, self.clock, on_spark_job=self.metrics.observe_spark_job)
            self.cleaner = build_log_cleaner(
                self.broker, self.log_manager, self.engine, scheduler=self.scheduler
            )
        self._schedule_tasks()
        self.scheduler.start()
        self.metrics.declare_jobs(job.name for job in self.scheduler.jobs())
        if self.cleaner is not None:
            self.cleaner.start()
        server = ApiServer(app, host=self.broker.api_host, port=self.broker.api_port)
        server.start()  # last: the API is ready once everything else is
        self.api_server = server
        logger.info(
            "logcleaner started: %d logs in %s", len(self.log_manager.logs), self.log_manager.log_dirs
        )

    def _schedule_tasks(self) -> None:
        broker, manager = self.broker, self.log_manager
        self.scheduler.add_periodic(
            "kafka-log-retention", broker.log_retention_check_interval_ms, self._retention
        )
        self.scheduler.add_periodic(
            "kafka-log-flusher", broker.log_flush_scheduler_interval_ms, manager.flush_dirty_logs
        )
        self.scheduler.add_periodic(
            "kafka-recovery-point-checkpoint",
            broker.log_flush_offset_checkpoint_interval_ms,
            manager.checkpoint_recovery_points,
        )
        self.scheduler.add_periodic(
            "kafka-log-start-offset-checkpoint",
            broker.log_flush_start_offset_checkpoint_interval_ms,
            manager.checkpoint_log_start_offsets,
        )
        self.scheduler.add_self_rescheduling("kafka-delete-logs", manager.delete_logs)
        self.scheduler.add_periodic(
            "logcleaner-topic-config-refresh", broker.log_cleaner_backoff_ms, self.refresh_topic_configs
        )

    def _retention(self) -> None:
        self.refresh_topic_configs()
        self.log_manager.cleanup_logs()

    def refresh_topic_configs(self) -> None:
        """Pick up topic overrides changed by another process (``logcleaner topic-config``) or the API."""
        self.topic_store.load()
        version = self.topic_store.version
        if version != self._config_version:
            self._config_version = version
            for topic in self.log_manager.topics():
                self.log_manager.apply_topic_config(topic)
            logger.info("Topic configs changed (version %d): applied to the live logs", version)

    @property
    def cleaner_view(self) -> CleanerView | None:
        """The log cleaner as the API and the metrics see it (None with ``log.cleaner.enable=false``)."""
        return self.cleaner

    def request_stop(self, signum: int | None = None, _frame: FrameType | None = None) -> None:
        if signum is not None:
            logger.info("Received signal %d: shutting down", signum)
        self._stop.set()

    def run_until_stopped(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)
        while not self._stop.wait(timeout=1.0):
            pass

    def shutdown(self) -> None:
        if self.api_server is not None:
            self.api_server.stop()  # first: no request reaches a closing log
        self._stop.set()
        if self.cleaner is not None:
            self.cleaner.shutdown()
        self.scheduler.shutdown(wait=True)
        if self.engine is not None:
            self.engine.close()
        self.metrics.close()  # no scrape reads the logs once they close
        self.log_manager.shutdown()
        logger.info("Shut down cleanly")

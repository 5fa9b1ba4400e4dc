"""The composition root of the long-running service: configuration, the LogManager, the scheduler.

Start-up: topic overrides are read, every log dir is locked and loaded (the LogManager), then Kafka's
periodic log tasks start after ``scheduler.initial.delay.ms``. SIGTERM/SIGINT: the scheduler stops (runs
in flight finish), every log is flushed and closed, both checkpoints and the clean-shutdown marker are
written, and the process exits 0.

Until the log cleaner exists (issue 4), a ``kafka-log-cleaner-thread-0`` thread does the part of a
cleaner thread's loop that is not cleaning: retention of compacted logs every ``log.cleaner.backoff.ms``.
"""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType

from scheduler.log_scheduler import LogScheduler
from service.clock import Clock, SystemClock
from service.config.broker_config import BrokerConfig
from service.config.topic_config import effective_log_config
from service.config.topic_store import TopicConfigStore
from service.log_manager import LogManager, LogManagerSettings
from service.ports import TaskScheduler
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
        self.scheduler = LogScheduler(self.clock, initial_delay_ms=broker.scheduler_initial_delay_ms)
        self.log_manager = build_log_manager(
            broker, self.topic_store, clock=self.clock, scheduler=self.scheduler
        )
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._config_version = 0

    def start(self) -> None:
        for path in self.log_manager.log_dirs:
            path.mkdir(parents=True, exist_ok=True)
        self.topic_store.load()
        self._config_version = self.topic_store.version
        self.log_manager.startup()
        self._schedule_tasks()
        self.scheduler.start()
        if self.broker.log_cleaner_enable:
            thread = threading.Thread(
                target=self._compacted_retention_loop, name="kafka-log-cleaner-thread-0", daemon=True
            )
            thread.start()
            self._threads.append(thread)
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

    def _compacted_retention_loop(self) -> None:
        while not self._stop.wait(self.broker.log_cleaner_backoff_ms / 1000):
            try:
                self.refresh_topic_configs()
                self.log_manager.cleanup_compacted_logs()
            except Exception:  # a failing round is logged; the loop goes on, as Kafka's cleaner thread
                logger.exception("Retention of compacted logs failed")

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
        self._stop.set()
        self.scheduler.shutdown(wait=True)
        for thread in self._threads:
            thread.join(timeout=30)
        self.log_manager.shutdown()
        logger.info("Shut down cleanly")

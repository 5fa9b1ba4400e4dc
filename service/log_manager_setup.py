"""Building the LogManager from the broker config: shared by ``serve`` and the offline commands, and light
to import (no API, scheduler or cleaner), so an offline command starts fast."""

from __future__ import annotations

from service.clock import Clock
from service.config.broker_config import BrokerConfig
from service.config.config_layers import NO_DYNAMIC_CONFIGS
from service.config.topic_config import effective_log_config
from service.config.topic_store import TopicConfigStore
from service.log_manager import LogManager, LogManagerSettings
from service.metadata.source import MetadataSource
from service.ports import TaskScheduler
from service.storage.log_config import LogConfig
from service.storage.log_dir import PartitionCopier

__all__ = ["build_log_manager"]


def build_log_manager(
    broker: BrokerConfig,
    store: TopicConfigStore,
    *,
    metadata: MetadataSource | None = None,
    clock: Clock,
    scheduler: TaskScheduler,
    read_only: PartitionCopier | None = None,
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
    )

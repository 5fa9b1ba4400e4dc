"""Topic overrides changed outside the daemon (another process, the API) reach its live logs, no restart."""

from __future__ import annotations

from pathlib import Path

from service.config.broker_config import BrokerConfig
from service.config.topic_store import TopicConfigStore
from service.daemon import Daemon
from service.storage.topic_partition import TopicPartition


def test_a_cleanup_policy_change_moves_the_log_between_retention_owners(tmp_path: Path) -> None:
    broker, _ = BrokerConfig.from_properties(
        # no task runs by itself; the API on any free port
        {"log.dirs": str(tmp_path), "scheduler.initial.delay.ms": "3600000", "api.port": "0"}
    )
    daemon = Daemon(broker)
    daemon.start()
    try:
        daemon.log_manager.create_topic("orders", 1)
        log = daemon.log_manager.get_log(TopicPartition("orders", 0))
        assert not log.config.is_compacted
        assert log in daemon.log_manager.retention_logs(compacted=False)

        TopicConfigStore([tmp_path]).update("orders", {"cleanup.policy": "compact", "retention.ms": 1000})
        daemon.refresh_topic_configs()

        assert log.config.is_compacted and log.config.retention_ms == 1000
        assert log in daemon.log_manager.retention_logs(compacted=True)
        assert log not in daemon.log_manager.retention_logs(compacted=False)
    finally:
        daemon.shutdown()
    restarted = Daemon(broker)
    restarted.start()
    try:
        assert restarted.log_manager.get_log(TopicPartition("orders", 0)).config.is_compacted, "durable"
    finally:
        restarted.shutdown()

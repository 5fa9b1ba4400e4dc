"""Topic overrides changed outside the daemon (another process, the API) reach its live logs, no restart."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from service.config.broker_config import BrokerConfig
from service.config.topic_store import TopicConfigStore
from service.shell.daemon import Daemon
from service.shell.node import TOPIC_CONFIG_REFRESH_MS
from service.storage.log import PartitionLog
from service.storage.topic_partition import TopicPartition
from tests.paths import REPO


def test_a_cleanup_policy_change_moves_the_log_between_retention_owners(tmp_path: Path) -> None:
    broker = _broker(tmp_path)
    daemon = Daemon(broker)
    daemon.start()
    try:
        log = _orders(daemon)
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


def test_a_topic_config_change_from_the_cli_reaches_a_running_daemon_within_a_second(tmp_path: Path) -> None:
    daemon = Daemon(_broker(tmp_path))
    daemon.start()
    try:
        log = _orders(daemon)
        assert log.config.retention_ms != 1000
        cli = [sys.executable, "-m", "service", "topic-config", "--override", f"log.dirs={tmp_path}"]
        subprocess.run(
            [*cli, "--topic", "orders", "--set", "retention.ms=1000"],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        changed = time.monotonic()
        while log.config.retention_ms != 1000 and time.monotonic() - changed < 10:
            time.sleep(0.02)
        took_s = time.monotonic() - changed
    finally:
        daemon.shutdown()
    assert log.config.retention_ms == 1000
    # One refresh period (TOPIC_CONFIG_REFRESH_MS, half a second) at most, plus slack for a loaded machine.
    assert took_s < 3 * TOPIC_CONFIG_REFRESH_MS / 1000, f"took {took_s:.2f} s"


def _broker(log_dir: Path) -> BrokerConfig:
    """No Kafka task runs by itself (the config refresh has no initial delay of its own); any free port."""
    broker, _ = BrokerConfig.from_properties(
        {"log.dirs": str(log_dir), "scheduler.initial.delay.ms": "3600000", "api.port": "0"}
    )
    return broker


def _orders(daemon: Daemon) -> PartitionLog:
    daemon.log_manager.create_topic("orders", 1)
    return daemon.log_manager.get_log(TopicPartition("orders", 0))

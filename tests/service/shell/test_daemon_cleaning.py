"""The daemon cleans a compacted topic on its own, round after round, while records keep arriving; and a
shutdown in the middle stops its cleaner threads before the logs are closed."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from service.config.broker_config import BrokerConfig
from service.shell.daemon import Daemon
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log import PartitionLog
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition

ENGINES = ["in-process"]


def wait_for(condition: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def produce(log: PartitionLog, round_no: int, keys: int = 60) -> None:
    for start in range(0, keys, 20):
        log.append_records(
            [Record(0, -1, b"k%d" % k, b"r%d-%d" % (round_no, k)) for k in range(start, start + 20)]
        )


@pytest.mark.parametrize("engine", ENGINES)
def test_the_daemon_cleans_a_compacted_topic_while_records_arrive(tmp_path: Path, engine: str) -> None:
    broker, _ = BrokerConfig.from_properties(
        {
            "log.dirs": str(tmp_path),
            "log.cleanup.policy": "compact",
            "log.segment.bytes": "4096",
            "log.cleaner.backoff.ms": "50",
            "log.cleaner.threads": "2",
            "log.cleaner.min.cleanable.ratio": "0.01",  # a round may start mid-write: clean the rest too
            "log.cleaner.engine": engine,
            "scheduler.initial.delay.ms": "3600000",  # only the cleaner acts by itself
            "api.port": "0",  # any free port
        }
    )
    daemon = Daemon(broker)
    daemon.start()
    checkpoint = OffsetCheckpointFile(tmp_path / "cleaner-offset-checkpoint")
    tp = TopicPartition("compacted", 0)
    try:
        (log,) = daemon.log_manager.create_topic("compacted", 1)
        ends = []
        for round_no in range(4):
            for _ in range(5):
                produce(log, round_no)
            upper = log.active_segment.base_offset
            wait_for(lambda upper=upper: checkpoint.read().get(tp, -1) >= upper, 120)  # type: ignore[misc]
            ends.append(checkpoint.read()[tp])
            cleaned = [r.key for r in log.read(0, max_records=100_000) if r.offset < ends[-1]]
            assert len(cleaned) == len(set(cleaned)), "one record per key in the cleaned section"
        assert ends == sorted(ends) and len(set(ends)) == 4
        latest = {r.key: r.value for r in log.read(0, max_records=100_000)}
        assert latest == {b"k%d" % k: b"r3-%d" % k for k in range(60)}
        view = daemon.cleaner_view
        assert view is not None and view.figures().bytes_read_total > 0
    finally:
        daemon.shutdown()
    assert daemon.cleaner is not None
    assert not any(w.thread.is_alive() for w in daemon.cleaner.workers), "stopped before the logs closed"

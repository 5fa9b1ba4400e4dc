"""Taking several logs at once (``log.cleaner.spark.max.logs.per.job``) without a JVM: the selection
(filthiest first, only logs whose rounds may share a job, up to the limit, all marked in progress) and the
worker's bookkeeping of a shared round (each log checkpointed or marked uncleanable on its own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cleaner.engine import InProcessEngine
from cleaner.pool.log_cleaner import LogCleaner
from cleaner.pool.manager import Candidate
from cleaner.pool.round import engine_round, engine_rounds
from cleaner.pool.worker import JobSharing
from service.core.cleanable import log_to_clean
from service.storage.log import PartitionLog
from tests.cleaner.helpers import Env, write_keys


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    environment = Env(tmp_path / "logs")
    yield environment
    environment.close()


def by_filth(env: Env, logs: list[PartitionLog]) -> list[PartitionLog]:
    now = env.manager.clock.now_ms()
    return sorted(logs, key=lambda log: -log_to_clean(log, None, now).cleanable_ratio)


def test_the_filthiest_log_comes_first_and_only_sharing_logs_join_it(env: Env) -> None:
    logs = env.topic("t", 4)
    for log, rounds in zip(logs, (2, 6, 4, 3), strict=True):
        write_keys(log, range(40), rounds=rounds)
    order = by_filth(env, logs)
    excluded = order[1].topic_partition
    manager = env.cleaner().manager

    taken = manager.grab_filthiest_compacted_logs(3, lambda c: c.topic_partition != excluded)
    assert [c.log for c in taken] == [order[0], order[2], order[3]]
    assert manager.in_progress == sorted(log.topic_partition for log in taken)
    for candidate in taken:
        manager.done_cleaning(candidate.log, None)

    def alone(_candidate: Candidate) -> bool:
        return False

    assert [c.log for c in manager.grab_filthiest_compacted_logs(3, alone)] == [order[0]], "no sharing"


def test_a_shared_round_settles_each_log_on_its_own(env: Env) -> None:
    logs = env.topic("t", 3)
    for log, rounds in zip(logs, (2, 6, 4), strict=True):
        write_keys(log, range(40), rounds=rounds)
    first, second, third = by_filth(env, logs)
    victim = second.segments[0].log_path
    data = bytearray(victim.read_bytes())
    data[-3] ^= 0xFF  # the second filthiest log's first segment fails its CRC
    victim.write_bytes(bytes(data))
    engine = InProcessEngine(env.manager.clock)
    manager = env.cleaner().manager
    sharing = JobSharing(
        3, lambda _c: True, engine_rounds(engine, throttle=lambda _b: None, scheduler=env.tasks)
    )
    cleaner = LogCleaner(
        manager,
        engine_round(engine, throttle=lambda _b: None, scheduler=env.tasks),
        env.manager.cleanup_compacted_log,
        threads=0,
        backoff_ms=20,
        sharing=sharing,
    )
    outcomes = cleaner.clean_filthiest_logs()
    assert [o.partition if o else None for o in outcomes] == [
        first.topic_partition.partition,
        None,
        third.topic_partition.partition,
    ]
    assert env.checkpoints() == {
        log.topic_partition: log.active_segment.base_offset for log in (first, third)
    }
    assert set(manager.uncleanable()[env.log_dir]) == {second.topic_partition}
    assert manager.in_progress == []
    assert cleaner.clean_filthiest_logs() == [], "nothing left: the uncleanable log is skipped"

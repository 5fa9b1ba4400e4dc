"""``write_workload``: the frame every ``gen`` workload runs in. Missing partitions are created with one
topic id per topic (an existing partition's id is kept for its topic), each target is filled, the dir is
closed cleanly (the clean-shutdown marker), and the overrides stored; a failed fill removes only the
partitions this run created and leaves no marker, so the next load recovers the rest. ``is_chosen`` picks
exactly round-down(share * n) of the first n, spread evenly."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.base.clock import ManualClock
from service.config.topic_store import TopicConfigStore
from service.shell.tools.workload_dir import GenResult, is_chosen, write_workload
from service.storage.clean_shutdown import read_clean_shutdown_marker
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.partition_files import load_topic_id
from service.storage.partition_metadata import new_topic_id, write_partition_metadata
from service.storage.records import Record
from service.storage.topic_partition import TopicPartition

NOW_MS = 1_700_000_000_000
CONFIG = LogConfig(cleanup_policy=frozenset({"compact"}))


def append_three(log: PartitionLog, now_ms: int) -> GenResult:
    log.append_records([Record(0, now_ms, b"k%d" % i, b"v") for i in range(3)])
    tp = log.topic_partition
    return GenResult(tp.topic, tp.partition, 3, log.log_end_offset, len(log.segments), log.size_bytes)


def targets(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]


def test_partitions_are_created_filled_and_closed_cleanly(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    results = write_workload(
        log_dir,
        targets("orders", 0, 1),
        CONFIG,
        {"cleanup.policy": "compact"},
        append_three,
        clock=ManualClock(NOW_MS),
    )
    assert [(r.topic, r.partition, r.records, r.log_end_offset) for r in results] == [
        ("orders", 0, 3, 3),
        ("orders", 1, 3, 3),
    ]
    ids = {load_topic_id(log_dir / f"orders-{p}") for p in (0, 1)}
    assert len(ids) == 1 and None not in ids, "one topic id for the topic's partitions"
    assert read_clean_shutdown_marker(log_dir) is not None
    assert TopicConfigStore([log_dir]).get("orders") == {"cleanup.policy": "compact"}


def test_a_new_partition_takes_its_topics_existing_id(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    (log_dir / "orders-0").mkdir(parents=True)
    topic_id = new_topic_id()
    write_partition_metadata(log_dir / "orders-0", topic_id)
    write_workload(log_dir, targets("orders", 0, 5), CONFIG, {}, append_three, clock=ManualClock(NOW_MS))
    assert load_topic_id(log_dir / "orders-5") == topic_id
    assert not TopicConfigStore([log_dir]).has("orders"), "no overrides given: none stored"


def test_a_second_run_appends_to_what_the_first_wrote(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    write_workload(log_dir, targets("orders", 0), CONFIG, {}, append_three, clock=ManualClock(NOW_MS))
    (again,) = write_workload(
        log_dir, targets("orders", 0), CONFIG, {}, append_three, clock=ManualClock(NOW_MS)
    )
    assert again.log_end_offset == 6


def test_a_failed_run_removes_what_it_created_and_leaves_no_marker(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    write_workload(log_dir, targets("orders", 0), CONFIG, {}, append_three, clock=ManualClock(NOW_MS))

    def fail_on_the_new_one(log: PartitionLog, now_ms: int) -> GenResult:
        if log.topic_partition.partition == 1:
            raise ValueError("bad option found on the first batch")
        return append_three(log, now_ms)

    with pytest.raises(ValueError, match="bad option"):
        write_workload(log_dir, targets("orders", 0, 1), CONFIG, {"retention.ms": "5"}, fail_on_the_new_one)
    assert (log_dir / "orders-0").is_dir() and not (log_dir / "orders-1").exists()
    assert read_clean_shutdown_marker(log_dir) is None, "the next load recovers orders-0"
    assert not TopicConfigStore([log_dir]).has("orders"), "no overrides stored"


@given(st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.25, 1 / 3, 0.5, 2 / 3, 0.9, 1.0]), st.integers(0, 400))
def test_is_chosen_picks_round_down_of_the_share(share: float, n: int) -> None:
    chosen = [i for i in range(n) if is_chosen(i, share)]
    assert len(chosen) == math.floor(n * share)
    if len(chosen) > 1:
        gaps = {b - a for a, b in itertools.pairwise(chosen)}
        assert max(gaps) - min(gaps) <= 1, "spread evenly"

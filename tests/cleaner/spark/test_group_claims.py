"""Group claims (``task_files``): the costliest free group first, each group to one task, a retried
attempt first taking again what its partition took before, and no group taken twice by tasks at once."""

from __future__ import annotations

import threading
from pathlib import Path

from cleaner.spark.task_files import claimed_groups, claims_path

SLOTS = [10, 11, 12, 13, 14]
COSTS = [1.0, 5.0, 3.0, 4.0, 2.0]


def test_two_tasks_take_the_costliest_free_group_in_turn(tmp_path: Path) -> None:
    path = claims_path(str(tmp_path), 100)
    first = claimed_groups(path, 0, SLOTS, COSTS)
    second = claimed_groups(path, 1, SLOTS, COSTS)
    taken = [next(first), next(second), next(second), next(first), next(first)]
    assert taken == [11, 13, 12, 14, 10]
    assert list(first) == [] and list(second) == []


def test_a_retried_attempt_takes_its_partitions_groups_again_first(tmp_path: Path) -> None:
    path = claims_path(str(tmp_path), 100)
    failed = claimed_groups(path, 3, SLOTS, COSTS)
    assert [next(failed), next(failed)] == [11, 13]
    failed.close()  # the attempt failed: its rows never reached the driver
    other = claimed_groups(path, 0, SLOTS, COSTS)
    assert next(other) == 12
    retry = claimed_groups(path, 3, SLOTS, COSTS)
    assert [next(retry), next(retry)] == [11, 13], "what the failed attempt took, costliest first"
    assert sorted([*retry, *other]) == [10, 14]


def test_tasks_at_once_take_every_group_exactly_once(tmp_path: Path) -> None:
    path = claims_path(str(tmp_path), 100)
    slots = list(range(400))
    costs = [float((i * 37) % 101) for i in slots]
    taken: list[list[int]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def task(partition: int) -> None:
        start.wait()
        taken[partition].extend(claimed_groups(path, partition, slots, costs))

    threads = [threading.Thread(target=task, args=(p,)) for p in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [slot for one in taken for slot in one]
    assert sorted(everything) == slots, "every group once"

"""Item claims (``task_files``): each item of a shared job is taken by one task, once; a retried attempt
takes again what its partition took and did not report; a reported item is taken by none."""

from __future__ import annotations

import threading
from pathlib import Path

from cleaner.spark.task_files import report_path, take, taken_path, write_report


def test_each_item_is_taken_by_one_task(tmp_path: Path) -> None:
    items = [(taken_path(str(tmp_path), end), report_path(str(tmp_path), end, 0)) for end in range(300)]
    taken: dict[int, list[int]] = {p: [] for p in range(4)}
    start = threading.Barrier(4)

    def task(partition: int) -> None:
        start.wait()
        taken[partition].extend(
            i for i, (claim, report) in enumerate(items) if take(claim, report, partition)
        )

    threads = [threading.Thread(target=task, args=(p,)) for p in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(i for mine in taken.values() for i in mine) == list(range(300))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(Path(claim).name for claim, _ in items)


def test_a_retry_takes_again_what_its_partition_left_unreported(tmp_path: Path) -> None:
    (done, done_report), (left, left_report) = (
        (taken_path(str(tmp_path), end), report_path(str(tmp_path), end, 0)) for end in (10, 20)
    )
    assert take(done, done_report, 1) and take(left, left_report, 1)
    write_report(done_report, [])
    assert not take(left, left_report, 0), "another partition's item"
    assert take(left, left_report, 1), "its own, unreported: taken again"
    assert not take(done, done_report, 1), "reported: done"

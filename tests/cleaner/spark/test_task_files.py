"""``task_files``: the files a Spark job's tasks and its driver share. Task reports: the driver hears each
item's rows once, whole, as soon as its file is there; a wake ends a wait at once. The round's ticket: a task
writes only while it holds it, and the driver's ``close`` waits for every holder, so no file of a cancelled
job's task appears after the driver cleaned up. Group claims: the costliest free group first, each group to
one task, a retried attempt first taking again what its partition took before, and no group taken twice by
tasks at once. Item claims: each item of a shared job is taken by one task, once; a retried attempt takes
again what its partition took and did not report; a reported item is taken by none."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from cleaner.spark.task_files import (
    JobCancelledError,
    JobReports,
    JobTicket,
    Rows,
    TaskTicket,
    claimed_groups,
    claims_path,
    private_leftovers,
    private_name,
    report_path,
    take,
    taken_path,
    write_report,
)


def test_each_report_is_heard_once_with_its_log(tmp_path: Path) -> None:
    paths = [report_path(str(tmp_path), 100, r) for r in range(3)]
    reports = JobReports([(7, paths[0]), (7, paths[1]), (9, paths[2])])
    heard: list[tuple[int, Rows]] = []
    assert reports.wait(0.0, heard.append) is False and heard == []
    write_report(paths[2], [{"slot": 2}])
    write_report(paths[0], [{"slot": 0}, {"slot": 1}])
    assert reports.wait(0.0, heard.append) is False
    assert sorted(heard, key=lambda h: h[0]) == [(7, [{"slot": 0}, {"slot": 1}]), (9, [{"slot": 2}])]
    heard.clear()
    assert reports.wait(0.02, heard.append) is False and heard == [], "a report is heard once"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(Path(p).name for p in (paths[0], paths[2]))


def test_a_report_is_read_whole_while_it_is_written(tmp_path: Path) -> None:
    path = report_path(str(tmp_path), 5, 0)
    rows: Rows = [{"slot": i, "bytes_read": i * 1000} for i in range(20_000)]
    reports = JobReports([(0, path)])
    heard: list[tuple[int, Rows]] = []
    writer = threading.Thread(target=write_report, args=(path, rows))
    writer.start()
    while not heard:
        reports.wait(0.001, heard.append)
    writer.join()
    assert heard == [(0, rows)]


def test_a_wake_ends_a_wait_at_once(tmp_path: Path) -> None:
    reports = JobReports([(0, report_path(str(tmp_path), 1, 0))])
    started = time.monotonic()
    assert reports.wait(0.05, print) is False
    assert time.monotonic() - started >= 0.05
    threading.Timer(0.05, reports.wake).start()
    assert reports.wait(30.0, print) is True
    assert time.monotonic() - started < 5.0


def test_a_killed_tasks_half_written_files_are_found_by_their_round(tmp_path: Path) -> None:
    """What a task killed between writing its private file and renaming it leaves, for the driver."""
    directory = str(tmp_path)
    left = [private_name(report_path(directory, 100, 1)), private_name(taken_path(directory, 100))]
    others = [
        report_path(directory, 100, 1),  # a whole report: the scratch list's
        os.path.join(directory, f"{100:020d}.keymap-0.cleaned"),
        private_name(report_path(directory, 101, 0)),  # another round's
        os.path.join(directory, f"{100:020d}.log.cleaned"),
    ]
    for path in (*left, *others):
        Path(path).write_text("x")
    assert sorted(map(str, private_leftovers(tmp_path, 100))) == sorted(left)


# -- the round's ticket ----------------------------------------------------------------------------------
def test_a_task_holds_the_ticket_until_it_ends_and_the_close_waits_for_it(tmp_path: Path) -> None:
    ticket = JobTicket.create(str(tmp_path), 42)
    assert Path(ticket.path).name == "00000000000000000042.job.cleaned"
    held, release = threading.Event(), threading.Event()
    seen: list[str] = []

    def task() -> None:
        with TaskTicket(ticket.ref) as mine:
            held.set()
            release.wait(5)
            try:
                mine.check()
            except JobCancelledError:
                seen.append("cancelled")
            time.sleep(0.2)
            seen.append("wrote")  # a write the task had started: before the close returns

    worker = threading.Thread(target=task)
    worker.start()
    assert held.wait(5)
    closer = threading.Thread(target=ticket.close)
    closer.start()
    time.sleep(0.1)
    assert closer.is_alive(), "the close waits for the task holding the ticket"
    assert not Path(ticket.path).exists(), "the ticket was withdrawn first"
    release.set()
    closer.join(5)
    assert seen == ["cancelled", "wrote"]
    worker.join(5)
    assert not list(tmp_path.iterdir())


def test_a_task_that_starts_after_the_close_writes_nothing(tmp_path: Path) -> None:
    ticket = JobTicket.create(str(tmp_path), 7)
    ticket.close()
    with pytest.raises(JobCancelledError), TaskTicket(ticket.ref):
        pytest.fail("entered without a ticket")
    ticket.close()  # twice: a no-op


def test_a_new_ticket_at_the_same_path_is_not_the_one_a_task_opened(tmp_path: Path) -> None:
    first = JobTicket.create(str(tmp_path), 7)
    with TaskTicket(first.ref) as mine:
        Path(first.path).unlink()
        second = JobTicket.create(str(tmp_path), 7)  # the next round of the log, same end offset
        with pytest.raises(JobCancelledError):
            mine.check()
    first.close()
    second.close()


def test_a_task_of_an_earlier_job_of_the_round_takes_no_later_ticket(tmp_path: Path) -> None:
    """A job cancelled and run again (another log of it was aborted) has a new ticket at the same path: a
    task of the first job still running must not take it and write for the second."""
    first = JobTicket.create(str(tmp_path), 7)
    first.close()
    second = JobTicket.create(str(tmp_path), 7)
    with pytest.raises(JobCancelledError), TaskTicket(first.ref):
        pytest.fail("a task of the earlier job took the later job's ticket")
    with TaskTicket(second.ref) as mine:
        mine.check()
    second.close()


# -- group claims ----------------------------------------------------------------------------------------
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


# -- item claims -----------------------------------------------------------------------------------------
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

"""The round's ticket: a task writes only while it holds it, and the driver's ``close`` waits for every
holder, so no file of a cancelled job's task appears after the driver cleaned up."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cleaner.spark.task_files import JobCancelledError, JobTicket, TaskTicket


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

"""``SwapThread``: the one thread a round's group swaps run on: started at the first job, not before; jobs
run one at a time in the order handed over, off the caller's thread; ``close`` (or leaving the ``with``)
waits for every job handed over, ends the thread, and a later job starts a new one. (``GroupSwap`` and
``sync_and_swap`` run in every cleaning round: ``test_cleaner``, ``test_swap_pipeline_crash``.)"""

from __future__ import annotations

import functools
import threading

from cleaner.compaction.group_swap import SwapThread


def live_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_no_thread_until_the_first_job_and_none_after_close() -> None:
    swaps = SwapThread("swap-test-lazy")
    assert live_threads("swap-test-lazy") == []
    ran = threading.Event()
    swaps.submit(ran.set)
    assert ran.wait(10)
    assert len(live_threads("swap-test-lazy")) == 1
    swaps.close()
    assert live_threads("swap-test-lazy") == []
    swaps.close()  # closing twice, or a thread never started, is a no-op
    SwapThread("swap-test-unused").close()


def test_jobs_run_in_order_on_one_thread_not_the_callers() -> None:
    order: list[int] = []
    threads: set[int] = set()

    def job(i: int) -> None:
        threads.add(threading.get_ident())
        order.append(i)

    with SwapThread("swap-test-order") as swaps:
        for i in range(50):
            swaps.submit(functools.partial(job, i))
    assert order == list(range(50)), "close waited for every job, run in the order handed over"
    assert len(threads) == 1 and threading.get_ident() not in threads


def test_a_job_waits_for_the_one_before_it() -> None:
    """One at a time: the second swap does not start while the first is still running."""
    first_running, release = threading.Event(), threading.Event()
    second_started = threading.Event()

    def first() -> None:
        first_running.set()
        release.wait(10)

    with SwapThread("swap-test-serial") as swaps:
        swaps.submit(first)
        swaps.submit(second_started.set)
        assert first_running.wait(10)
        assert not second_started.wait(0.05)
        release.set()
    assert second_started.is_set()


def test_after_close_a_job_starts_a_new_thread() -> None:
    swaps = SwapThread("swap-test-again")
    idents: list[int] = []
    swaps.submit(lambda: idents.append(threading.get_ident()))
    swaps.close()
    swaps.submit(lambda: idents.append(threading.get_ident()))
    swaps.close()
    assert len(idents) == 2 and live_threads("swap-test-again") == []

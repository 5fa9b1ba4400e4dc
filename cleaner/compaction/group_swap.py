"""A cleaned group's fsync and swap on the round's swap thread (``SwapThread``), while the round cleans the
next group.

The swap is a group's commit point (``LocalLog.replaceSegments``): its ``.cleaned`` files need only be
durable before ``.cleaned`` → ``.swap``, as Kafka's ``cleanSegments`` flushes the cleaned segment and then
calls ``replaceSegments``. ``Cleaner.clean`` writes group N+1 while group N's files are fsynced and swapped in
here (the fsyncs and the swap's two directory syncs wait on the disk, not the CPU), and waits for N's swap
before it hands N+1 over: the swaps stay in the groups' order, one at a time, and every one is done
before the round returns.

A crash at any moment: before N's swap starts, N's and N+1's ``.cleaned`` files are deleted by the
loader and their source segments are intact; from the ``.swap`` rename on, the loader completes N's
swap (``PartitionLog.replace_segments``). Group N+1 reads only its own source segments, never N's, and
its aborted transactions sit in its own segments' ``.txnindex`` (a marker follows its data): its inputs
are the same whether N is swapped yet or not (the Spark engine cleans every group of a round from the
same state).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from types import TracebackType

from service.storage.log import PartitionLog
from service.storage.segment import LogSegment

__all__ = ["GroupSwap", "SwapThread", "sync_and_swap"]


def sync_and_swap(log: PartitionLog, cleaned: LogSegment, replaced: Sequence[LogSegment]) -> list[LogSegment]:
    """fsync the finished ``.cleaned`` segment (closed, indexes trimmed, mtime set), then swap it in for
    ``replaced``; returns the replaced segments the swap renamed ``.deleted``. A failed fsync deletes the
    ``.cleaned`` files (nothing was published)."""
    try:
        cleaned.flush()
    except BaseException:
        cleaned.delete_files()
        raise
    return log.replace_segments([cleaned], replaced)


class SwapThread:
    """The thread a round's group swaps run on, one after the other in the order handed over: one thread
    per round, started at the first group, not one per group (a thread's start costs the round's thread
    GIL time, and a round has a group per 16 MiB or so). ``close`` (or leaving the ``with``) waits until
    every swap handed over has run, then ends the thread. A Spark task's fsyncs run on one too
    (``spark.rewrite.CleanedSyncs``)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, job: Callable[[], None]) -> None:
        """Run ``job`` after the jobs handed over before it (it must not raise)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name)
            self._thread.start()
        self._jobs.put(job)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def close(self) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None

    def __enter__(self) -> SwapThread:
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()


class GroupSwap:
    """``sync_and_swap`` of one group, handed at construction to ``thread`` (else to a thread of its own);
    ``result`` waits for it. Its fields are written by the swapping thread only, and read after ``_done``."""

    def __init__(
        self,
        log: PartitionLog,
        cleaned: LogSegment,
        replaced: Sequence[LogSegment],
        thread: SwapThread | None = None,
    ) -> None:
        self._log = log
        self._cleaned = cleaned
        self._replaced = list(replaced)
        self._doomed: list[LogSegment] = []
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._own = (
            SwapThread(f"swap-{log.topic_partition}-{cleaned.base_offset}") if thread is None else None
        )
        (thread or self._own).submit(self._run)  # type: ignore[union-attr]  # one of the two is set

    def _run(self) -> None:
        try:
            self._doomed = sync_and_swap(self._log, self._cleaned, self._replaced)
        except BaseException as exc:  # handed to the round's thread by result()
            self._error = exc
        finally:
            self._done.set()

    def result(self) -> list[LogSegment]:
        """Wait for the swap; the replaced segments now ``.deleted``, or the swap's error raised."""
        self._done.wait()
        if self._own is not None:
            self._own.close()
        if self._error is not None:
            raise self._error
        return self._doomed

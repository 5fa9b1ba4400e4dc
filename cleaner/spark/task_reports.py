"""Reports that Spark tasks send the driver as each task ends, not when its whole job does.

A task's return value reaches the driver only with every other task's, when ``collect`` returns. A PySpark
accumulator's update is merged on the driver as each task completes: the DAGScheduler applies a successful
result task's updates once per partition, before the job ends, and drops those of failed attempts. A shared
job's driver uses this to swap each log in as soon as its last task has ended, while other logs' tasks
still run (``SparkEngine.clean_many``). The reports only bring that forward: the job's ``collect`` still
returns every row, and whatever no report settled is settled from those rows after the job.

One accumulator serves every job of a SparkContext (``ReportChannel``); a report names its job's key, and
the driver hands it to that job's ``JobReports`` queue. On an executor the accumulator only collects the
task's reports, which Spark sends with the task's result.
"""

from __future__ import annotations

import queue
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.accumulators import AccumulatorParam

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.accumulators import Accumulator

__all__ = ["JobReports", "ReportChannel", "ReportSender"]

Report = tuple[str, object]  # (job key, payload)

# On the driver: job key → where its reports go. Executors leave it empty and never set _ON_DRIVER.
_LISTENERS: dict[str, Callable[[object], None]] = {}
_LISTENERS_LOCK = threading.Lock()
_ON_DRIVER = False
_WAKE = object()  # put by ``JobReports.wake``: the wait ends without a report


class _ReportsParam(AccumulatorParam[list[Report]]):
    """On an executor, a task's reports are collected in a list; on the driver each is handed on as it
    arrives (on PySpark's accumulator server thread) and none is kept."""

    def zero(self, value: list[Report]) -> list[Report]:
        return []

    def addInPlace(self, value1: list[Report], value2: list[Report]) -> list[Report]:
        if not _ON_DRIVER:
            value1.extend(value2)
            return value1
        for key, payload in value2:
            with _LISTENERS_LOCK:
                listener = _LISTENERS.get(key)
            if listener is not None:  # else its job is over: the job's rows settle it
                listener(payload)
        return value1


@dataclass(frozen=True, slots=True)
class ReportSender:
    """What a task holds (pickled with the task's function): ``send`` a payload to its job's driver."""

    accumulator: Accumulator[list[Report]]
    key: str

    def send(self, payload: object) -> None:
        self.accumulator.add([(self.key, payload)])


class ReportChannel:
    """The SparkContext's one accumulator of reports; create it on the driver."""

    def __init__(self, context: SparkContext) -> None:
        global _ON_DRIVER
        _ON_DRIVER = True
        self.context = context
        self._accumulator = context.accumulator([], _ReportsParam())

    def open_job(self) -> JobReports:
        return JobReports(self._accumulator)


class JobReports:
    """One job's reports on the driver: ``sender`` goes to its tasks; ``wait`` hands what arrived to
    ``handle`` on the caller's thread. ``close`` when the job is over (later reports are dropped)."""

    def __init__(self, accumulator: Accumulator[list[Report]]) -> None:
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self.sender = ReportSender(accumulator, uuid.uuid4().hex)
        with _LISTENERS_LOCK:
            _LISTENERS[self.sender.key] = self._queue.put

    def wait(self, timeout_s: float, handle: Callable[[object], None]) -> bool:
        """Up to ``timeout_s`` for a report or a ``wake``; every report already there goes to ``handle``.
        True once woken."""
        woken = False
        try:
            item = self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return woken
        while True:
            if item is _WAKE:
                woken = True
            else:
                handle(item)
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return woken

    def wake(self) -> None:
        """End a ``wait`` now (the job's action has returned)."""
        self._queue.put(_WAKE)

    def close(self) -> None:
        with _LISTENERS_LOCK:
            _LISTENERS.pop(self.sender.key, None)

"""Reports that Spark tasks leave for the driver as each rewrite item ends, not when the whole job does.

A task's return value reaches the driver only with every other task's, when ``collect`` returns, and a
task of a shared job cleans several logs one after the other (``job_plan``). So once an item's files are
durable, its task writes the item's rows to the item's report file in its log's dir
(``<round end offset>.rows.<range>.cleaned``, a ``.cleaned`` name, which the loader deletes after a crash:
written whole under a name of its own, then renamed, while the task holds the round's ticket) and goes
on. Between its abort checks the driver looks for the report files of the items it has not heard from
(``JobReports``), and a job's driver uses them to swap each log in as soon as its last item has ended
(``SparkEngine.clean_many``). The reports only bring that forward: ``collect`` still returns every row, and
whatever no report settled is settled from those rows after the job. Executors already write the log dirs
(``rewrite``), so this works on a real cluster as on ``local[*]``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["JobReports", "Rows", "private_leftovers", "private_name", "report_path", "write_report"]

Rows = list[Mapping[str, object]]

_POLL_S = 0.005  # how often a waiting driver looks for new report files: a stat per item not heard from


def report_path(directory: str, end_offset: int, range_index: int) -> str:
    return os.path.join(directory, f"{end_offset:020d}.rows.{range_index}.cleaned")


def private_name(path: str) -> str:
    """A name next to ``path`` that only this thread of this process writes, with ``path``'s suffix (a
    ``.cleaned`` one: the loader deletes what a killed task left): a file is written whole under it, then
    given ``path``'s name at once."""
    base, _, suffix = path.rpartition(".")
    return f"{base}-{os.getpid()}-{threading.get_ident()}.{suffix}"


def private_leftovers(directory: Path, end_offset: int) -> list[Path]:
    """The ``private_name`` files a task of the round ending at ``end_offset`` left half written when it was
    killed (its report, its item claim): for the driver to remove once no task holds the round's ticket."""
    return list(directory.glob(f"{end_offset:020d}.*-[0-9]*-[0-9]*.cleaned"))


def write_report(path: str, rows: Sequence[Mapping[str, object]]) -> None:
    """The item's rows at ``path``, appearing whole (not durable: a crash ends the job, and the loader
    deletes the file)."""
    partial = private_name(path)
    with open(partial, "w", encoding="utf-8") as out:
        json.dump(rows, out)
    os.replace(partial, path)


class JobReports:
    """One job's reports on the driver: ``wait`` hands each item's ``(log, rows)`` to ``handle`` on the
    caller's thread, once. ``items``: each item's log and report path."""

    def __init__(self, items: Sequence[tuple[int, str]]) -> None:
        self._pending = list(items)
        self._woken = threading.Event()

    def wait(self, timeout_s: float, handle: Callable[[tuple[int, Rows]], None]) -> bool:
        """Up to ``timeout_s`` for a report or a ``wake``; every report already there goes to ``handle``.
        True once woken."""
        deadline = time.monotonic() + timeout_s
        while True:
            woken = self._woken.is_set()
            if self._hand_on(handle) or woken:
                return woken
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._woken.wait(min(_POLL_S, left))

    def wake(self) -> None:
        """End a ``wait`` now (the job's action has returned)."""
        self._woken.set()

    def _hand_on(self, handle: Callable[[tuple[int, Rows]], None]) -> bool:
        arrived = []
        for log, path in self._pending:
            try:
                with open(path, encoding="utf-8") as report:
                    arrived.append((log, path, json.load(report)))
            except FileNotFoundError:
                continue
        if not arrived:
            return False
        heard = {path for _log, path, _rows in arrived}
        self._pending = [(log, path) for log, path in self._pending if path not in heard]
        for log, _path, rows in arrived:
            handle((log, rows))
        return True

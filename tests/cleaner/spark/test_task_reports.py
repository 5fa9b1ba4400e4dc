"""Task reports (``task_files``): the driver hears each item's rows once, whole, as soon as its file is
there; a wake ends a wait at once."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from cleaner.spark.task_files import (
    JobReports,
    Rows,
    private_leftovers,
    private_name,
    report_path,
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

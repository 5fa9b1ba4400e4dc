"""Logs forced into many ranges, as a cluster's cores would cut them, with the key classes they make seen."""

from __future__ import annotations

from typing import Any

import pytest

from cleaner.spark import jobs, partial_maps


def force_ranges(monkeypatch: pytest.MonkeyPatch, ranges: int, max_classes: int) -> list[int]:
    """Every log of a job cut into ``ranges`` (however unequal they come out), at most ``max_classes`` key
    classes; the list returned gets each log's number of key classes as the job is planned."""
    monkeypatch.setattr(jobs, "ranges_per_log", lambda sizes, _cores, _min: [ranges] * len(sizes))
    monkeypatch.setattr(jobs, "_MAX_RANGE_SHARE", 1.0)
    monkeypatch.setattr(jobs, "MAX_KEY_CLASSES", max_classes)
    made: list[int] = []

    def class_tasks(*args: Any) -> Any:
        tasks = partial_maps.class_tasks(*args)
        made.append(len(tasks))
        return tasks

    monkeypatch.setattr(jobs, "class_tasks", class_tasks)
    return made

"""Kill points for the round processes (``round_process.py`` here and in ``spark/``): each step of the swap
protocol counted as it is reached, and the process SIGKILLed the n-th time the chosen step is reached."""

from __future__ import annotations

import os
import signal
import sys

from service.storage.log_files import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX
from service.storage.segment import LogSegment

__all__ = ["KillPoint", "report_renames"]

_RENAMES = {
    (CLEANED_SUFFIX, SWAP_SUFFIX): "swap",
    ("", DELETED_SUFFIX): "deleted",
    (SWAP_SUFFIX, ""): "renamed",
}


class KillPoint:
    """Counts each step as it is reached and kills at the chosen one: this process (every thread), or with
    ``whole_group`` its process group (a Spark driver's JVM and Python workers too)."""

    def __init__(self, step: str | None, nth: int, *, whole_group: bool = False) -> None:
        self.step = step
        self.nth = nth
        self.whole_group = whole_group
        self.seen: dict[str, int] = {}

    def reached(self, step: str) -> None:
        self.seen[step] = self.seen.get(step, 0) + 1
        if step == self.step and self.seen[step] == self.nth:
            sys.stdout.flush()
            if self.whole_group:
                os.killpg(os.getpgrp(), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)


def report_renames(kill: KillPoint) -> None:
    """Wrap a segment's suffix change so the swap's renames report ``swap``, ``deleted`` and ``renamed``
    after each is done."""
    rename = LogSegment.change_file_suffixes

    def change_file_suffixes(self: LogSegment, old_suffix: str, new_suffix: str) -> None:
        rename(self, old_suffix, new_suffix)
        step = _RENAMES.get((old_suffix, new_suffix))
        if step is not None:
            kill.reached(step)

    LogSegment.change_file_suffixes = change_file_suffixes  # type: ignore[method-assign]

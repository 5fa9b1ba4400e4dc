"""A shared job's rewrite items taken one at a time by its tasks, so a job of many logs needs one task a core.

A Spark task costs a launch, a round trip to its Python worker and a wait for its results (10–35 ms on a
2-core VM, between the end of one task and the start of the next). A job of many logs of one range each
therefore runs one task per core (``job_plan``), and each task takes the job's items one after the other,
the largest first, whichever no other task has taken: Spark's own balancing, without a task per item.
The job's smallest log is not taken: every task joins it once none is left (``job_plan.shared_log``).

An item is taken by creating its claim file (``<round end offset>.taken.cleaned`` in its log's dir, a
``.cleaned`` name, which the loader deletes after a crash) holding the taking partition's number: written
under a name of its own, then hard-linked to the claim's name, which fails if the claim exists, so the
file appears whole and once. The task holds the round's ticket while it takes (``job_ticket``): no claim
is written after the driver removed the log's files. A retried attempt of a partition takes again the
items an earlier attempt of its partition took but did not report (``task_reports``); an item whose report
exists is done.
"""

from __future__ import annotations

import os

from cleaner.spark.task_reports import private_name

__all__ = ["take", "taken_path"]


def taken_path(directory: str, end_offset: int) -> str:
    return os.path.join(directory, f"{end_offset:020d}.taken.cleaned")


def take(path: str, report: str, partition: int) -> bool:
    """Whether this attempt of ``partition`` cleans the item claimed at ``path``: it was free, or an earlier
    attempt of ``partition`` took it and left no ``report``."""
    if os.path.exists(report):
        return False
    own = private_name(path)
    with open(own, "w", encoding="ascii") as out:
        out.write(str(partition))
    try:
        os.link(own, path)
        return True
    except FileExistsError:
        with open(path, encoding="ascii") as claim:
            return claim.read() == str(partition)
    finally:
        os.unlink(own)

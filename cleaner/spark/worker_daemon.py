"""The Python worker daemon for Spark (``spark.python.daemon.module``), the tasks' modules imported once.

Spark forks each Python worker from one daemon per executor; a worker idle for a minute exits, so a service
whose rounds come minutes apart gets fresh workers for most of them. Imported here, before the forks, the
modules a cleaning task needs (the C extension, the storage layer, the rules: 0.1–0.2 s per worker on a
small machine) come with every worker for free. Executors run ``python -m cleaner.spark.worker_daemon``, so
the package must be installed where they run (it must be anyway: the tasks import it).

The daemon's objects are then frozen out of the cyclic collector (``gc.freeze``): PySpark's worker runs
``gc.collect()`` after every task, and walking the 46,000 objects of these modules took 16–35 ms a task on
a 2-core VM (200 empty tasks: 25 ms a task without the freeze, 4–6 ms with it). Module objects are never
garbage.

A worker whose executor has closed its socket (the executor let an idle worker go, or stopped) ends
quietly: over a Unix domain socket (``session.DEFAULT_SPARK_CONF``) its last flush then fails at once, and
PySpark's daemon would print a ``BrokenPipeError`` traceback for each such worker, which the service logs
as warnings every time its workers idle out. Nothing is lost: the executor reads nothing more from it.
"""

from __future__ import annotations

import gc
import socket

from pyspark import daemon

import cleaner.spark.partial_maps
import cleaner.spark.rewrite

__all__ = ["PRELOADED", "worker_ending_quietly"]

PRELOADED = (cleaner.spark.partial_maps.__name__, cleaner.spark.rewrite.__name__)

_pyspark_worker = daemon.worker


def worker_ending_quietly(sock: socket.socket, authenticated: bool) -> int:
    """PySpark's ``daemon.worker``; a closed socket ends it with a failure code (the worker then exits)."""
    try:
        return _pyspark_worker(sock, authenticated)
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    daemon.worker = worker_ending_quietly
    gc.freeze()
    daemon.manager()

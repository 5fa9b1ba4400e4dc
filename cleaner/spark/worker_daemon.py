"""The Python worker daemon for Spark (``spark.python.daemon.module``), the tasks' modules imported once.

Spark forks each Python worker from one daemon per executor; a worker idle for a minute exits, so a service
whose rounds come minutes apart gets fresh workers for most of them. Imported here, before the forks, the
modules a cleaning task needs (the C extension, the storage layer, the rules: 0.1–0.2 s per worker on a
small machine) come with every worker for free. Executors run ``python -m cleaner.spark.worker_daemon``, so
the package must be installed where they run (it must be anyway: the tasks import it).
"""

from __future__ import annotations

from pyspark import daemon

import cleaner.spark.partial_maps
import cleaner.spark.rewrite

__all__ = ["PRELOADED"]

PRELOADED = (cleaner.spark.partial_maps.__name__, cleaner.spark.rewrite.__name__)

if __name__ == "__main__":
    daemon.manager()

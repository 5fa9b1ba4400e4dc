"""What a task sees of its Python worker (``test_worker_daemon``): a module of its own, so that the worker
imports nothing more than this to run it (a test module would bring pytest's objects along)."""

from __future__ import annotations

import gc
import os
import sys


def worker_state(_partition: int, _rows: object) -> list[tuple[int, bool, str, bool]]:
    """(objects frozen, whether the preloaded ``cleaner.spark.rewrite``'s namespace is among them (not
    among the objects the collector tracks: a reused worker tracks what its earlier tasks left, so only
    this says whether the daemon's objects were frozen), the Unix-socket flag, whether the daemon preloaded
    the cleaner's modules)."""
    rewrite = sys.modules.get("cleaner.spark.rewrite")
    tracked = {id(o) for o in gc.get_objects()}
    return [
        (
            gc.get_freeze_count(),
            rewrite is not None and id(vars(rewrite)) not in tracked,
            os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED", "").lower(),
            rewrite is not None,
        )
    ]

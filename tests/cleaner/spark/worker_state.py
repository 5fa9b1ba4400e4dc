"""What a task sees of its Python worker (``test_worker_daemon``): a module of its own, so that the worker
imports nothing more than this to run it (a test module would bring pytest's objects along)."""

from __future__ import annotations

import gc
import os
import sys


def worker_state(_partition: int, _rows: object) -> list[tuple[int, int, str, bool]]:
    """(objects frozen, objects the collector tracks, the Unix-socket flag, whether the daemon preloaded
    the cleaner's modules)."""
    return [
        (
            gc.get_freeze_count(),
            len(gc.get_objects()),
            os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED", "").lower(),
            "cleaner.spark.rewrite" in sys.modules,
        )
    ]

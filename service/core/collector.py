"""Cyclic garbage collection paused while a broker's worth of logs is loaded or inspected."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused(*, freeze: bool = False) -> Iterator[None]:
    """No cyclic garbage collection inside: loading logs only adds live objects (a dozen a partition), and
    each full collection would walk all of those loaded so far again (at 10,000 partitions, a tenth of the
    start-up time). Collection resumes after, if it was enabled.

    ``freeze`` (``serve``'s start-up, an inspection): every object alive at the end is moved to the
    collector's permanent generation first (``gc.freeze``), as a long-lived service's start-up state is.
    Otherwise the first allocation after the pause collects the youngest generation, which then holds every
    object loaded: at 10,000 partitions 0.1 s before the daemon answers, and each later full collection
    would walk the logs again. Frozen objects are still freed when their last reference goes; only a
    reference cycle among them would stay (a loaded log holds none)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()

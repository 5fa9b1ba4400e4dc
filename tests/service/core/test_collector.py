"""``collector_paused``: no cyclic collection inside; with ``freeze``, what is alive at the end leaves the
collector's view (``serve``'s start-up), and collection resumes either way."""

from __future__ import annotations

import gc

from service.core.collector import collector_paused


def test_the_collector_is_paused_inside_and_resumes_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_freeze_moves_what_is_alive_out_of_the_collector() -> None:
    gc.collect()
    try:
        with collector_paused(freeze=True):
            loaded = [[n] for n in range(10_000)]  # a start-up's loaded objects: tracked, alive
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(loaded)
        assert gc.get_count()[0] < len(loaded)  # the youngest generation no longer holds them
    finally:
        gc.unfreeze()

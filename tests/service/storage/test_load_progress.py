"""``LoadProgress``: the logs start-up has found and loaded so far, counted by the loader threads and read
as one consistent pair by ``/readyz`` and the metrics."""

from __future__ import annotations

import threading

from service.storage.load_progress import LoadProgress


def test_counts_and_description() -> None:
    progress = LoadProgress()
    assert progress.counts == (0, 0)
    assert progress.describe() == "loading: 0 of 0 logs"
    progress.found(10_000)
    for _ in range(1_234):
        progress.loaded_one()
    assert progress.counts == (1_234, 10_000)
    assert progress.describe() == "loading: 1,234 of 10,000 logs"


def test_many_loader_threads_lose_no_count() -> None:
    progress = LoadProgress()

    def load_a_dir() -> None:
        progress.found(500)
        for _ in range(500):
            progress.loaded_one()

    threads = [threading.Thread(target=load_a_dir) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert progress.counts == (4000, 4000)

"""The cleaner's pool and its lifecycle (Kafka ``LogCleaner``, ``CleanerThread``, ``LogCleanerManager``).

Where a log enters cleaning and leaves it: the worker threads and their start and stop (``log_cleaner``,
``worker``), the per-partition cleaning states, in-progress lock, checkpoints and the choice of the
dirtiest log (``manager``), the I/O throttle the workers share (``throttler``), and one round as a worker
runs it: an engine over the chosen log's cleanable range, its outcome reported (``round``). Nothing here
reads a record: that is the engines' and ``cleaner.compaction``'s work.
"""

__all__: list[str] = []

"""Kafka's LogCleaner, laid out as a record travels through it.

A compacted log's dirty segments wait on disk until the pool (``cleaner.pool``: Kafka's ``LogCleaner``
threads, the ``LogCleanerManager`` bookkeeping that picks the dirtiest log and holds the in-progress lock,
the I/O throttler) grabs the log for a round (``cleaner.pool.round``). The round hands it to an engine
(``cleaner.engine``: the protocol, the in-process engine and the per-round choice; ``cleaner.spark``: the
same round as Spark tasks), which runs compaction (``cleaner.compaction``: the key map over the dirty
section, the retention rules, the transaction state, the groups and their cleaned segments) and swaps each
cleaned group back into the log (``cleaner.compaction.group_swap``); the pool then checkpoints the round's
end offset. ``cleaner.native`` is the C path (``cleaner._native``, built from ``cleaner/native/``) behind
the compaction rules; ``cleaner.errors`` the errors all of them raise.
"""

__all__: list[str] = []

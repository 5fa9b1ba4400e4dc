"""The leader-epoch checkpoints retention left unwritten, written for many logs at once.

Retention cuts each log's leader-epoch cache in memory (``truncate_from_start(flush=False)``, as Kafka
3.7.1+ does) and leaves the file to a later write. One write per log costs two fsyncs (10,000 logs: 4.9 s
one at a time, 2.9 s on 16 threads); here they share one ``AtomicBatch``: every checkpoint is staged, one
sync makes them all durable, each is renamed over its file under its log's lock, and one more sync makes
the renames durable. Each file still goes new content durable, then rename, so a kill at any point leaves
each file with its old entries (which the next load cuts again from the log start offset) or its new
ones. The staging and the renames run on ``threads`` threads: each is a file creation or a rename that
replaces a file, kernel work that releases the GIL and that waits on the file system's journal.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from service.base.errors import LogClosedError
from service.storage.atomic_batch import AtomicBatch
from service.storage.log import PartitionLog

__all__ = ["flush_leader_epochs_in_batch"]

logger = logging.getLogger(__name__)


DEFAULT_THREADS = 8  # 1: 8.7–24 s at 10,000 logs on a loaded ext4; 4: 4.5–9.1 s; 8: 4.1–5.0 s


def flush_leader_epochs_in_batch(logs: Iterable[PartitionLog], *, threads: int = DEFAULT_THREADS) -> int:
    """Write the pending epoch checkpoints of ``logs``; returns how many were written.

    A log whose stage or rename fails is logged and left as it is (an I/O error takes it offline; a log
    still open writes its checkpoint at close). A failed sync drops the whole batch (every file keeps its
    old content, every cache stays pending) and is logged.
    """
    pending = [log for log in logs if log.has_unflushed_leader_epochs]
    if not pending:
        return 0
    batch = AtomicBatch()
    with ThreadPoolExecutor(max(1, min(threads, len(pending))), "logcleaner-epoch-flush") as pool:
        tokens = list(pool.map(lambda log: _stage(log, batch), pending))
        staged = [(log, token) for log, token in zip(pending, tokens, strict=True) if token is not None]
        if not staged:
            return 0
        try:
            batch.sync()
        except OSError as exc:
            batch.abandon()
            logger.warning("Could not sync %d leader-epoch checkpoints: %s; not written", len(staged), exc)
            return 0
        written = sum(pool.map(lambda item: _commit(item[0], item[1], batch), staged))
    try:
        batch.finish()
    except OSError as exc:  # the files hold their new entries; a power loss may bring back the old
        logger.warning("Could not sync the renames of %d leader-epoch checkpoints: %s", written, exc)
    return written


def _stage(log: PartitionLog, batch: AtomicBatch) -> int | None:
    try:
        return log.stage_leader_epochs(batch)
    except (OSError, LogClosedError) as exc:
        logger.warning("Could not write the leader-epoch checkpoint of %s: %s", log, exc)
        return None


def _commit(log: PartitionLog, token: int, batch: AtomicBatch) -> bool:
    try:
        return log.commit_leader_epochs(batch, token)
    except (OSError, LogClosedError) as exc:
        logger.warning("Could not write the leader-epoch checkpoint of %s: %s", log, exc)
        return False

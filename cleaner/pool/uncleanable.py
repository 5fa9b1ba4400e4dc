"""The partitions the cleaner gave up on (Kafka ``LogCleanerManager.uncleanablePartitions``), and when it
tries each again (``log.cleaner.uncleanable.retry.backoff.ms``, ours).

Kafka keeps a partition uncleanable until the broker restarts. Here a partition is tried again once its
backoff has passed: ``log.cleaner.uncleanable.retry.backoff.ms`` after the first failure, doubling with
each failed attempt up to an hour (or the backoff itself, if longer); -1 keeps Kafka's "until restart".
``POST /v1/cleaner/uncleanable/{topic}/{partition}/retry`` makes the retry due at once.

Each partition's lifecycle, its attempts counted across it::

    cleanable     → uncleanable(1)     a selection or a round fails (``mark``)
    uncleanable(n)→ retrying(n)        its retry is due at a selection (``is_uncleanable`` says no), or a
                                       retry is requested and then due
    retrying(n)   → uncleanable(n+1)   it fails again
    retrying(n)   → cleanable          a round of it ends well (``cleaned``)
    uncleanable(n)→ cleanable          a forced round of it ends well (``cleaned``)

A retrying partition is cleanable to every reader (the selection, ``GET /v1/cleaner``, the metrics); only
its attempts and first failure are kept, so a failure again counts on. ``_lock`` guards ``_entries`` and
``_retrying``; it is taken alone, so a ``/metrics`` scrape never waits for a selection.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from service.base.audit import audit_log
from service.base.clock import Clock
from service.base.wording import human_duration, utc_date
from service.storage.topic_partition import TopicPartition

__all__ = ["MAX_RETRY_BACKOFF_MS", "UncleanablePartition", "UncleanablePartitions", "retry_delay_ms"]

logger = logging.getLogger(__name__)

MAX_RETRY_BACKOFF_MS = 3_600_000  # the doubling stops at an hour


def retry_delay_ms(backoff_ms: int, attempts: int) -> int | None:
    """How long after its ``attempts``-th failure a partition is tried again (None: never, backoff -1):
    ``backoff_ms`` doubled per attempt after the first, up to an hour (or ``backoff_ms`` if longer)."""
    if backoff_ms < 0:
        return None
    cap = max(backoff_ms, MAX_RETRY_BACKOFF_MS)
    return min(backoff_ms << min(max(attempts - 1, 0), 32), cap)


@dataclass(frozen=True, slots=True)
class UncleanablePartition:
    """One partition the cleaner gave up on: why (the last failure), since when (the first), how many
    attempts failed, when it is tried again (None: never) and its cleanable bytes then."""

    log_dir: Path
    topic_partition: TopicPartition
    reason: str
    since_ms: int
    attempts: int
    next_retry_ms: int | None
    cleanable_bytes: int

    def is_due(self, now_ms: int) -> bool:
        return self.next_retry_ms is not None and now_ms >= self.next_retry_ms

    def to_json(self) -> dict[str, object]:
        """One entry of ``GET /v1/cleaner``'s ``uncleanable``."""
        tp = self.topic_partition
        return {
            "log_dir": str(self.log_dir),
            "topic": tp.topic,
            "partition": tp.partition,
            "bytes": self.cleanable_bytes,
            "reason": self.reason,
            "since": utc_date(self.since_ms),
            "since_ms": self.since_ms,
            "attempts": self.attempts,
            "next_retry": None if self.next_retry_ms is None else utc_date(self.next_retry_ms),
            "next_retry_ms": self.next_retry_ms,
        }


class UncleanablePartitions:
    """The registry of uncleanable partitions (see the module docstring); times come from ``clock``."""

    def __init__(self, clock: Clock, retry_backoff_ms: int) -> None:
        self._clock = clock
        self.retry_backoff_ms = retry_backoff_ms
        self._lock = threading.Lock()
        self._entries: dict[TopicPartition, UncleanablePartition] = {}
        self._retrying: dict[TopicPartition, UncleanablePartition] = {}  # the entries being tried again

    def mark(
        self, log_dir: Path, tp: TopicPartition, reason: str, cleanable_bytes: int, *, by: str
    ) -> UncleanablePartition:
        """Give up on ``tp`` (again): one more failed attempt; ``by`` names the thread, for the audit line."""
        now = self._clock.now_ms()
        with self._lock:
            before = self._entries.get(tp) or self._retrying.pop(tp, None)
            if before is not None and before.log_dir != log_dir:
                before = None  # another dir's replica of the partition: a history of its own
            attempts = 1 if before is None else before.attempts + 1
            delay = retry_delay_ms(self.retry_backoff_ms, attempts)
            entry = UncleanablePartition(
                log_dir,
                tp,
                reason,
                now if before is None else before.since_ms,
                attempts,
                None if delay is None else now + delay,
                cleanable_bytes,
            )
            self._entries[tp] = entry
        retry = "never (until restart)" if delay is None else f"in {human_duration(delay)}"
        audit_log.info(
            "%s: gave up cleaning %s in %s (attempt %d): %s; next try %s",
            by,
            tp,
            log_dir,
            attempts,
            reason,
            retry,
        )
        return entry

    def is_uncleanable(self, log_dir: Path, tp: TopicPartition) -> bool:
        """Whether the cleaner skips ``tp``: uncleanable and not due. A due one turns retrying here (one
        audit line), so the caller's selection tries it."""
        now = self._clock.now_ms()
        with self._lock:
            entry = self._entries.get(tp)
            if entry is None or entry.log_dir != log_dir:
                return False
            if not entry.is_due(now):
                return True
            del self._entries[tp]
            self._retrying[tp] = entry
        audit_log.info(
            "retrying cleaning of %s in %s (attempt %d; uncleanable since %s: %s)",
            tp,
            log_dir,
            entry.attempts + 1,
            utc_date(entry.since_ms),
            entry.reason,
        )
        return False

    def request_retry(self, tp: TopicPartition) -> UncleanablePartition:
        """Make ``tp``'s retry due now (it is tried at the next selection). Raises ``LookupError`` if it is
        not uncleanable."""
        now = self._clock.now_ms()
        with self._lock:
            entry = self._entries.get(tp)
            if entry is None:
                raise LookupError(f"{tp} is not uncleanable")
            entry = replace(entry, next_retry_ms=min(now, entry.next_retry_ms or now))
            self._entries[tp] = entry
        audit_log.info("retry of %s in %s requested: tried at the next selection", tp, entry.log_dir)
        return entry

    def cleaned(self, tp: TopicPartition) -> None:
        """A round of ``tp`` ended well: it is cleanable again, its attempts forgotten."""
        with self._lock:
            entry = self._entries.pop(tp, None) or self._retrying.pop(tp, None)
        if entry is not None:
            audit_log.info(
                "%s in %s is cleanable again after %d failed attempt(s)", tp, entry.log_dir, entry.attempts
            )

    def prune(self, log_dir_of: Callable[[TopicPartition], Path | None]) -> None:
        """Forget the partitions no longer live in the dir they failed in (deleted, moved); ``log_dir_of``:
        a partition's live log dir (None: not loaded). Asked of the entries only: this runs at each status
        and scrape, and a broker has many partitions but few uncleanable ones."""
        with self._lock:
            for entries in (self._entries, self._retrying):
                for tp in [tp for tp, e in entries.items() if log_dir_of(tp) != e.log_dir]:
                    del entries[tp]

    def entries(self) -> list[UncleanablePartition]:
        """The uncleanable partitions (not those being retried), by log dir and partition."""
        with self._lock:
            return sorted(self._entries.values(), key=lambda e: (e.log_dir, e.topic_partition))

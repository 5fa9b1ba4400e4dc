"""The cleaner's bookkeeping (Kafka ``LogCleanerManager``): per-partition cleaning
states, the in-progress lock, ``cleaner-offset-checkpoint`` files, uncleanable partitions, selection.

States and legal transitions (anything else raises ``IllegalCleanerStateError``)::

    none          → InProgress    grab for cleaning, or for cleaner-driven retention
    InProgress    → none          done cleaning (checkpoint := end offset) / done deleting
    Aborted       → Paused(1)     done cleaning or deleting after an abort (no checkpoint); waiters wake
    none          → Paused(1)     abort_and_pause
    InProgress    → Aborted       abort_and_pause; the caller then waits until the round notices (Paused)
    Paused(n)     → Paused(n+1)   abort_and_pause
    Paused(1)     → none          resume
    Paused(n>1)   → Paused(n−1)   resume

``_cond`` (a condition on one lock) guards ``_states``; ``_checkpoint_lock`` guards every read-modify-write
of a checkpoint file; ``_unreadable_lock`` guards ``_unreadable`` alone; ``uncleanable_partitions`` has a
lock of its own, taken alone, so that a ``/metrics`` scrape reading it never waits for a selection (order:
``_cond`` before ``_checkpoint_lock`` before the registry's). A finished round's checkpoint is written
outside ``_cond``, its log still in progress (no worker picks it, an abort waits for it): the other workers'
abort checks and selections do not wait for its fsyncs. ``is_aborted``, polled by every running round,
reads ``_states`` without the lock (one dict read: it sees the state before or after a transition, as a
check a moment earlier or later would).

Failures stay with their log or file (Kafka ``allCleanerCheckpoints``, ``grabFilthiestCompactedLog``): an
unreadable ``cleaner-offset-checkpoint`` is one ERROR naming the file and the bad line, its dir's logs are
chosen as if it were empty (cleaned from their log start, which is safe) and the next checkpoint of that dir
writes it whole again; an error choosing one log marks that log uncleanable with the reason.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from cleaner.errors import IllegalCleanerStateError
from cleaner.pool.uncleanable import UncleanablePartition, UncleanablePartitions
from service.base.clock import Clock
from service.base.errors import LogCleanerError
from service.core.cleanable import LogToClean, log_to_clean
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log import PartitionLog
from service.storage.log_files import CLEANER_OFFSET_CHECKPOINT
from service.storage.topic_partition import TopicPartition

__all__ = ["DEFAULT_UNCLEANABLE_RETRY_BACKOFF_MS", "CleanerManager", "Candidate", "State", "describe_failure"]

DEFAULT_UNCLEANABLE_RETRY_BACKOFF_MS = 600_000

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class State:
    """One partition's cleaning state; ``paused`` counts nested pauses."""

    name: str  # "in-progress", "aborted" or "paused"
    paused: int = 0


IN_PROGRESS = State("in-progress")
ABORTED = State("aborted")


@dataclass(frozen=True, slots=True)
class Candidate:
    """The log chosen for a round, with Kafka's byte accounting."""

    log: PartitionLog
    to_clean: LogToClean

    @property
    def topic_partition(self) -> TopicPartition:
        return self.log.topic_partition


class CleanerManager:
    def __init__(
        self,
        logs: Callable[[], dict[TopicPartition, PartitionLog]],
        clock: Clock,
        unmanaged: Callable[[Path], Collection[TopicPartition]] = lambda _log_dir: (),
        *,
        uncleanable_retry_backoff_ms: int = DEFAULT_UNCLEANABLE_RETRY_BACKOFF_MS,
    ) -> None:
        """``logs`` returns the live logs (the LogManager's view), read afresh at each selection;
        ``unmanaged`` a log dir's logs not managed here (``LogManager.unmanaged_in``), whose checkpoint
        entries are carried over; ``uncleanable_retry_backoff_ms``:
        ``log.cleaner.uncleanable.retry.backoff.ms``."""
        self._logs = logs
        self._unmanaged = unmanaged
        self.clock = clock
        self._cond = threading.Condition()
        self._checkpoint_lock = threading.Lock()
        self._states: dict[TopicPartition, State] = {}
        self._pause_reasons: dict[TopicPartition, str] = {}  # why a partition was paused, where said
        self.uncleanable_partitions = UncleanablePartitions(clock, uncleanable_retry_backoff_ms)
        self._unreadable: dict[Path, str] = {}  # checkpoint file → its error, reported once
        self._unreadable_lock = threading.Lock()
        self.max_dirty_percent = 0
        self.last_selection_ms: int | None = None

    # -- selection (Kafka ``grabFilthiestCompactedLog``) ------------------------------------------

    def grab_filthiest_compacted_log(self) -> Candidate | None:
        """Choose the eligible compacted log with the highest cleanable ratio and mark it in progress."""
        chosen = self.grab_filthiest_compacted_logs(1, lambda _c: False)
        return chosen[0] if chosen else None

    def grab_filthiest_compacted_logs(
        self, limit: int, shares_job: Callable[[Candidate], bool]
    ) -> list[Candidate]:
        """The filthiest eligible log, and, if ``shares_job`` says its round may share a job (it goes to
        Spark), the next filthiest eligible logs whose rounds may too, up to ``limit`` logs in all; every one
        marked in progress under the one lock, so another worker never picks them."""
        with self._cond:
            now = self.clock.now_ms()
            self.last_selection_ms = now
            checkpoints = self.all_checkpoints()
            candidates = []
            for tp, log in self._logs().items():
                if not log.config.is_compacted or tp in self._states or self.is_uncleanable(tp, log):
                    continue
                try:
                    to_clean = self._log_to_clean(log, checkpoints.get(tp), now)
                except Exception as exc:  # this log's fault alone (Kafka ``LogCleaningException``)
                    logger.error(
                        "Error choosing whether to clean %s (log dir %s); marking it uncleanable",
                        tp,
                        log.log_dir,
                        exc_info=exc,
                    )
                    self.mark_uncleanable(log, _inactive_bytes(log), describe_failure(exc))
                    continue
                if to_clean.total_bytes > 0:
                    candidates.append(Candidate(log, to_clean))
            best_ratio = max((c.to_clean.cleanable_ratio for c in candidates), default=0.0)
            self.max_dirty_percent = int(100 * best_ratio)
            eligible = [
                c for c in candidates if c.to_clean.verdict(c.log.config.min_cleanable_dirty_ratio)[0]
            ]
            if not eligible:
                return []
            eligible.sort(key=lambda c: c.to_clean.cleanable_ratio, reverse=True)  # stable: ties keep order
            chosen = [eligible[0]]
            if limit > 1 and shares_job(chosen[0]):
                chosen += [c for c in eligible[1:] if shares_job(c)][: limit - 1]
            for candidate in chosen:
                self._states[candidate.topic_partition] = IN_PROGRESS
            return chosen

    def _log_to_clean(self, log: PartitionLog, checkpoint: int | None, now_ms: int) -> LogToClean:
        to_clean = log_to_clean(log, checkpoint, now_ms)
        if checkpoint is not None and to_clean.first_dirty_offset != checkpoint:
            self._write_checkpoint(log, to_clean.first_dirty_offset)  # an invalid one is reset now
        return to_clean

    def candidate_for(self, tp: TopicPartition) -> Candidate:
        """A forced round for one partition (``logcleaner clean --topic --partition``): any dirty ratio,
        still never past the first uncleanable offset. Marks it in progress."""
        with self._cond:
            log = self._logs()[tp]
            if not log.config.is_compacted:
                policy = ",".join(sorted(log.config.cleanup_policy))
                raise ValueError(f"{tp} is not compacted (cleanup.policy={policy})")
            self._require_no_state(tp, "clean")
            to_clean = log_to_clean(log, self.all_checkpoints().get(tp), self.clock.now_ms())
            self._states[tp] = IN_PROGRESS
            return Candidate(log, to_clean)

    def grab_logs_for_retention(self) -> list[PartitionLog]:
        """Compacted logs for cleaner-driven retention (Kafka ``deletableLogs``), marked in progress."""
        with self._cond:
            chosen = [
                log
                for tp, log in self._logs().items()
                if log.config.is_compacted and tp not in self._states and not self.is_uncleanable(tp, log)
            ]
            for log in chosen:
                self._states[log.topic_partition] = IN_PROGRESS
            return chosen

    def pause_for_retention(self, logs: Iterable[PartitionLog]) -> list[PartitionLog]:
        """The retention task's pause of non-compacted logs not in any cleaning state (Paused(1))."""
        with self._cond:
            paused = [log for log in logs if log.topic_partition not in self._states]
            for log in paused:
                self._states[log.topic_partition] = State("paused", 1)
            return paused

    # -- transitions (Kafka ``LogCleaningState``) -------------------------------------------------

    def done_cleaning(self, log: PartitionLog, end_offset: int | None) -> None:
        """InProgress → none, checkpoint := ``end_offset`` (None: failed, no update; else the log is cleanable
        again if it was not); Aborted → Paused(1)."""
        tp = log.topic_partition
        with self._cond:
            state = self._states.get(tp)
            if state != IN_PROGRESS:
                self._leave_cleaning(tp, "done cleaning")
                return
        try:
            if end_offset is not None:  # still in progress: written outside _cond (see the module doc)
                self.uncleanable_partitions.cleaned(tp)
                self._write_checkpoint(log, end_offset)
        finally:
            with self._cond:
                self._leave_cleaning(tp, "done cleaning")

    def _leave_cleaning(self, tp: TopicPartition, action: str) -> None:
        """InProgress → none; Aborted → Paused(1), waking the aborter. Holds ``_cond``."""
        state = self._states.get(tp)
        if state == IN_PROGRESS:
            del self._states[tp]
        elif state == ABORTED:
            self._states[tp] = State("paused", 1)
            self._cond.notify_all()
        else:
            raise IllegalCleanerStateError(f"{action} {tp} in state {state}")

    def done_deleting(self, logs: Iterable[PartitionLog]) -> None:
        with self._cond:
            for log in logs:
                self._leave_cleaning(log.topic_partition, "done deleting")

    def abort_and_pause(self, tp: TopicPartition, timeout_s: float = 60.0, *, reason: str = "") -> None:
        """Stop any cleaning of ``tp`` and keep it paused; waits until a running round has noticed.
        ``reason``: why, as ``GET /v1/cleaner`` lists the paused partitions (``future-replica``)."""
        with self._cond:
            if reason:
                self._pause_reasons[tp] = reason
            state = self._states.get(tp)
            if state is None:
                self._states[tp] = State("paused", 1)
            elif state == IN_PROGRESS:
                self._states[tp] = ABORTED
                if not self._cond.wait_for(lambda: self._states.get(tp, ABORTED).name == "paused", timeout_s):
                    raise IllegalCleanerStateError(f"cleaning of {tp} did not stop within {timeout_s} s")
            elif state.name == "paused":
                self._states[tp] = State("paused", state.paused + 1)
            else:
                raise IllegalCleanerStateError(f"abort and pause {tp} in state {state}")

    def resume(self, tp: TopicPartition) -> None:
        with self._cond:
            state = self._states.get(tp)
            if state is None or state.name != "paused":
                raise IllegalCleanerStateError(f"resume {tp} in state {state}")
            if state.paused == 1:
                del self._states[tp]
                self._pause_reasons.pop(tp, None)
            else:
                self._states[tp] = State("paused", state.paused - 1)

    def abort(self, tp: TopicPartition) -> None:
        """Abort and resume: a running round stops; nothing stays paused."""
        self.abort_and_pause(tp)
        self.resume(tp)

    def is_aborted(self, tp: TopicPartition) -> bool:
        return self._states.get(tp) == ABORTED  # without the lock: see the module doc

    def state_of(self, tp: TopicPartition) -> State | None:
        with self._cond:
            return self._states.get(tp)

    def paused(self) -> dict[TopicPartition, str]:
        """The partitions paused now, each with the reason it was paused for (``paused`` if none given)."""
        with self._cond:
            return {
                tp: self._pause_reasons.get(tp, "paused")
                for tp, s in sorted(self._states.items())
                if s.name == "paused"
            }

    @property
    def in_progress(self) -> list[TopicPartition]:
        with self._cond:
            return sorted(tp for tp, s in self._states.items() if s == IN_PROGRESS)

    def _require_no_state(self, tp: TopicPartition, action: str) -> None:
        state = self._states.get(tp)
        if state is not None:
            why = self._pause_reasons.get(tp)
            detail = (
                " (future-replica: a move between log dirs is under way)" if why == "future-replica" else ""
            )
            raise IllegalCleanerStateError(f"cannot {action} {tp}: it is {state.name}{detail}")

    # -- uncleanable partitions ------------------------------------------------------------------

    def mark_uncleanable(
        self, log: PartitionLog, cleanable_bytes: int, reason: str, *, by: str | None = None
    ) -> None:
        """Give up on ``log`` (until its retry; see ``UncleanablePartitions``); ``by`` names the thread
        (default: the calling thread's name)."""
        self.uncleanable_partitions.mark(
            log.log_dir,
            log.topic_partition,
            reason,
            cleanable_bytes,
            by=by or threading.current_thread().name,
        )

    def is_uncleanable(self, tp: TopicPartition, log: PartitionLog) -> bool:
        """Skipped by the selection: uncleanable and its retry not due (a due one is tried again now)."""
        return self.uncleanable_partitions.is_uncleanable(log.log_dir, tp)

    def retry_uncleanable(self, tp: TopicPartition) -> UncleanablePartition:
        """Try ``tp`` again at the next selection; ``LookupError`` if it is not uncleanable."""
        self._prune_uncleanable()
        return self.uncleanable_partitions.request_retry(tp)

    def uncleanable_entries(self) -> list[UncleanablePartition]:
        """The uncleanable partitions still live, by log dir and partition."""
        self._prune_uncleanable()
        return self.uncleanable_partitions.entries()

    def uncleanable(self) -> dict[Path, dict[TopicPartition, int]]:
        """Per log dir: the uncleanable partitions still live, with their cleanable bytes."""
        out: dict[Path, dict[TopicPartition, int]] = {}
        for entry in self.uncleanable_entries():
            out.setdefault(entry.log_dir, {})[entry.topic_partition] = entry.cleanable_bytes
        return out

    def uncleanable_past_retry(self) -> dict[Path, int]:
        """Per log dir: the uncleanable partitions whose retry is due but not yet taken by a selection."""
        now = self.clock.now_ms()
        out: dict[Path, int] = {}
        for entry in self.uncleanable_entries():
            if entry.is_due(now):
                out[entry.log_dir] = out.get(entry.log_dir, 0) + 1
        return out

    def _prune_uncleanable(self) -> None:
        logs = self._logs()

        def log_dir_of(tp: TopicPartition) -> Path | None:
            log = logs.get(tp)
            return None if log is None else log.log_dir

        self.uncleanable_partitions.prune(log_dir_of)

    # -- checkpoints -----------------------------------------------------------------------------

    def all_checkpoints(self) -> dict[TopicPartition, int]:
        """Each live log's entry, from its own dir's file: another dir's line of the same partition (a
        broker's stray or ``-future`` replica, kept by every rewrite) is not this log's. An unreadable file
        counts as empty (``_read_checkpoints``)."""
        logs = self._logs()
        out: dict[TopicPartition, int] = {}
        for log_dir in {log.log_dir for log in logs.values()}:
            for tp, offset in self._read_checkpoints(log_dir).items():
                log = logs.get(tp)
                if log is not None and log.log_dir == log_dir:
                    out[tp] = offset
        return out

    def _read_checkpoints(self, log_dir: Path) -> dict[TopicPartition, int]:
        """One dir's ``cleaner-offset-checkpoint``; an unreadable one is an ERROR naming the file and the bad
        line (once, until it reads again) and reads as empty: its logs are cleaned from their log start."""
        file = _checkpoint_file(log_dir)
        try:
            entries = file.read()
        except (OSError, LogCleanerError) as exc:
            error = str(exc)
            with self._unreadable_lock:
                is_new = self._unreadable.get(file.path) != error
                self._unreadable[file.path] = error
            if is_new:
                logger.error(
                    "Cannot read the cleaner checkpoint %s (%s); cleaning the logs of %s from their log "
                    "start until the next checkpoint of that dir writes the file whole again",
                    file.path,
                    error,
                    log_dir,
                )
            return {}
        with self._unreadable_lock:
            if self._unreadable.pop(file.path, None) is not None:
                logger.info("The cleaner checkpoint %s reads again", file.path)
        return entries

    def _write_checkpoint(self, log: PartitionLog, offset: int) -> None:
        self.update_checkpoint(log.log_dir, log.topic_partition, offset)

    def update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int | None) -> None:
        """Set (None: remove) one entry; as Kafka does, entries of partitions no longer live are dropped,
        but those of the logs not managed here are kept as they are. An unreadable file is written whole
        again, with this entry alone."""
        with self._checkpoint_lock:
            live = {t for t, log in self._logs().items() if log.log_dir == log_dir}
            file = _checkpoint_file(log_dir)
            try:
                current = file.read()
            except (OSError, LogCleanerError) as exc:
                logger.warning("Rewriting the unreadable cleaner checkpoint %s whole (%s)", file.path, exc)
                current = {}
            entries = {t: o for t, o in current.items() if t in live and t != tp}
            if offset is not None:
                entries[tp] = offset
            file.write(entries, carry_over=self._unmanaged(log_dir))
        with self._unreadable_lock:
            self._unreadable.pop(file.path, None)


def describe_failure(exc: BaseException) -> str:
    """An uncleanable partition's reason: the error's type and message."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _inactive_bytes(log: PartitionLog) -> int:
    """The bytes below the active segment (the most a round could read), for a log whose selection failed."""
    try:
        return sum(segment.size_bytes for segment in log.segments[:-1])
    except Exception:  # the log's own files are what failed: no figure
        return 0


def _checkpoint_file(log_dir: Path) -> OffsetCheckpointFile:
    return OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT)

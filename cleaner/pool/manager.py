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
of a checkpoint file; ``_uncleanable_lock`` guards ``_uncleanable`` alone, so that a ``/metrics`` scrape
reading it never waits for a selection (order: ``_cond`` before ``_checkpoint_lock`` before
``_uncleanable_lock``). A finished round's checkpoint is written outside ``_cond``, its log still in
progress (no worker picks it, an abort waits for it): the other workers' abort checks and selections do not
wait for its fsyncs. ``is_aborted``, polled by every running round, reads ``_states`` without the lock (one
dict read: it sees the state before or after a transition, as a check a moment earlier or later would).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from cleaner.errors import IllegalCleanerStateError
from service.cleanable import LogToClean, log_to_clean
from service.clock import Clock
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.log import PartitionLog
from service.storage.log_files import CLEANER_OFFSET_CHECKPOINT
from service.storage.topic_partition import TopicPartition

__all__ = ["CleanerManager", "Candidate", "State"]

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
    ) -> None:
        """``logs`` returns the live logs (the LogManager's view), read afresh at each selection;
        ``unmanaged`` a log dir's logs not managed here (``LogManager.unmanaged_in``), whose checkpoint
        entries are carried over."""
        self._logs = logs
        self._unmanaged = unmanaged
        self.clock = clock
        self._cond = threading.Condition()
        self._checkpoint_lock = threading.Lock()
        self._states: dict[TopicPartition, State] = {}
        self._uncleanable: dict[Path, dict[TopicPartition, int]] = {}  # log dir → partition → its bytes
        self._uncleanable_lock = threading.Lock()
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
                checkpoint = checkpoints.get(tp)
                to_clean = log_to_clean(log, checkpoint, now)
                if checkpoint is not None and to_clean.first_dirty_offset != checkpoint:
                    self._write_checkpoint(log, to_clean.first_dirty_offset)  # an invalid one is reset now
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
        """InProgress → none, checkpoint := ``end_offset`` (None: failed, no update); Aborted → Paused(1)."""
        tp = log.topic_partition
        with self._cond:
            state = self._states.get(tp)
            if state != IN_PROGRESS:
                self._leave_cleaning(tp, "done cleaning")
                return
        try:
            if end_offset is not None:  # still in progress: written outside _cond (see the module doc)
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

    def abort_and_pause(self, tp: TopicPartition, timeout_s: float = 60.0) -> None:
        """Stop any cleaning of ``tp`` and keep it paused; waits until a running round has noticed."""
        with self._cond:
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

    @property
    def in_progress(self) -> list[TopicPartition]:
        with self._cond:
            return sorted(tp for tp, s in self._states.items() if s == IN_PROGRESS)

    def _require_no_state(self, tp: TopicPartition, action: str) -> None:
        state = self._states.get(tp)
        if state is not None:
            raise IllegalCleanerStateError(f"cannot {action} {tp}: it is {state.name}")

    # -- uncleanable partitions ------------------------------------------------------------------

    def mark_uncleanable(self, log: PartitionLog, cleanable_bytes: int) -> None:
        with self._uncleanable_lock:
            self._uncleanable.setdefault(log.directory.parent, {})[log.topic_partition] = cleanable_bytes

    def is_uncleanable(self, tp: TopicPartition, log: PartitionLog) -> bool:
        with self._uncleanable_lock:
            return tp in self._uncleanable.get(log.directory.parent, {})

    def uncleanable(self) -> dict[Path, dict[TopicPartition, int]]:
        """Per log dir: the uncleanable partitions still live, with their cleanable bytes."""
        live = self._logs()
        with self._uncleanable_lock:
            for partitions in self._uncleanable.values():
                for tp in [tp for tp in partitions if tp not in live]:
                    del partitions[tp]
            return {d: dict(p) for d, p in self._uncleanable.items()}

    # -- checkpoints -----------------------------------------------------------------------------

    def all_checkpoints(self) -> dict[TopicPartition, int]:
        """Each live log's entry, from its own dir's file: another dir's line of the same partition (a
        broker's stray or ``-future`` replica, kept by every rewrite) is not this log's."""
        logs = self._logs()
        out: dict[TopicPartition, int] = {}
        for log_dir in {log.directory.parent for log in logs.values()}:
            for tp, offset in _checkpoint_file(log_dir).read().items():
                log = logs.get(tp)
                if log is not None and log.directory.parent == log_dir:
                    out[tp] = offset
        return out

    def _write_checkpoint(self, log: PartitionLog, offset: int) -> None:
        self.update_checkpoint(log.directory.parent, log.topic_partition, offset)

    def update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int | None) -> None:
        """Set (None: remove) one entry; as Kafka does, entries of partitions no longer live are dropped,
        but those of the logs not managed here are kept as they are."""
        with self._checkpoint_lock:
            live = {t for t, log in self._logs().items() if log.directory.parent == log_dir}
            file = _checkpoint_file(log_dir)
            entries = {t: o for t, o in file.read().items() if t in live and t != tp}
            if offset is not None:
                entries[tp] = offset
            file.write(entries, carry_over=self._unmanaged(log_dir))


def _checkpoint_file(log_dir: Path) -> OffsetCheckpointFile:
    return OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT)

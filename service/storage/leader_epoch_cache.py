"""A partition's leader-epoch cache (Kafka ``LeaderEpochFileCache``), backed by ``leader-epoch-checkpoint``.

Entries ``(epoch, start_offset)`` ascend in both fields. Transitions, each followed by an atomic rewrite of
the checkpoint file when the entries changed:

- ``assign(epoch, start)``: a batch of ``epoch`` was appended at ``start``. Nothing changes when the last
  entry already has that epoch at or below ``start``; otherwise entries with an epoch ≥ ``epoch`` or a start
  ≥ ``start`` go (they are not monotonic with the new one) and the new entry is appended;
- ``truncate_from_start(offset)``: the log start offset moved to ``offset``. Entries starting at or below it
  go, and the last of them comes back starting at ``offset`` (epochs 0@0, 1@90 and offset 100 → 1@100).
  With ``flush=False`` (retention, as Kafka's ``truncateFromStartAsyncFlush`` since KAFKA-15046/16541; also
  taken by ``truncate_from_end``) the file is written later, by ``flush``: a crash before that leaves the
  older entries, which the next load cuts again, so nothing is lost, and a retention pass pays no fsync per
  log;
- ``truncate_from_end(offset)``: the log was cut at ``offset``; entries starting at or above it go;
- ``clear()``: every entry goes (the log was deleted whole).

A truncation left unwritten can also be written with many other logs' in one ``AtomicBatch`` (two syncs
for all of them): ``stage_flush`` writes its ``.tmp``, and ``commit_flush`` renames it after the batch's
sync, unless the entries changed or were written meanwhile (then the newer state stands and the staged
file is dropped).

Not thread-safe: ``PartitionLog`` calls it under its lock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from service.storage.atomic_batch import AtomicBatch
from service.storage.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    encode_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)

__all__ = ["LeaderEpochCache"]

logger = logging.getLogger(__name__)


class LeaderEpochCache:
    def __init__(self, directory: Path, entries: Iterable[EpochEntry] = (), *, persist: bool = True) -> None:
        """``persist`` False keeps the cache in memory only (a log nothing may write to)."""
        self._directory = directory
        self._entries: list[EpochEntry] = list(entries)
        self._persist = persist
        self._unflushed = False  # a truncation not written yet (``truncate_from_start(flush=False)``)
        self._version = 0  # counts changes of the entries and writes of the file (``commit_flush``)

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def epoch_for_append(self) -> int:
        """The epoch a new batch carries: the latest entry's, 0 for a log that has none."""
        return self._entries[-1].epoch if self._entries else 0

    def assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0:
            return False
        last = self._entries[-1] if self._entries else None
        if last is not None and last.epoch == epoch and last.start_offset <= start_offset:
            return False
        self._entries = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
        self._entries.append(EpochEntry(epoch, start_offset))
        self._version += 1
        self._write()
        return True

    def truncate_from_start(self, start_offset: int, *, flush: bool = True) -> None:
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed or (len(removed) == 1 and removed[0].start_offset == start_offset):
            return
        kept = [e for e in self._entries if e.start_offset > start_offset]
        self._entries = [EpochEntry(removed[-1].epoch, start_offset), *kept]
        self._version += 1
        self._write_or_defer(flush)

    def _write_or_defer(self, flush: bool) -> None:
        if flush:
            self._write()
        else:
            self._unflushed = True

    @property
    def has_unflushed_change(self) -> bool:
        return self._unflushed

    def flush(self) -> None:
        """Write the checkpoint if a truncation left it behind the entries in memory."""
        if self._unflushed:
            self._write()

    def stage_flush(self, batch: AtomicBatch) -> int | None:
        """Stage the checkpoint a truncation left behind in ``batch``; None when there is none to write.
        Returns the token ``commit_flush`` takes, once the batch is synced."""
        if not self._unflushed:
            return None
        if not self._persist:
            self._unflushed = False
            return None
        batch.stage(self._path, encode_leader_epoch_checkpoint(self._entries))
        return self._version

    def commit_flush(self, batch: AtomicBatch, token: int) -> bool:
        """Rename the checkpoint ``stage_flush`` staged over the file, if nothing changed or wrote the
        entries since (else drop it, and return False: the newer entries are written, or will be)."""
        if token != self._version or not self._unflushed:
            self.discard_flush(batch)
            return False
        batch.commit(self._path)
        self._unflushed = False
        self._version += 1
        return True

    def discard_flush(self, batch: AtomicBatch) -> None:
        """Drop what ``stage_flush`` staged (the file keeps its content; the cache stays unflushed)."""
        batch.discard(self._path)

    @property
    def _path(self) -> Path:
        return self._directory / LEADER_EPOCH_CHECKPOINT

    def truncate_from_end(self, end_offset: int, *, flush: bool = True) -> None:
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        self._entries = [e for e in self._entries if e.start_offset < end_offset]
        self._version += 1
        self._write_or_defer(flush)

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._version += 1
            self._write()

    def write(self) -> None:
        """Write the checkpoint as it is now (a log created or rebuilt writes its first one)."""
        self._write()

    def create_file(self) -> None:
        """Create the checkpoint empty when it is missing, as a broker does for a new log.

        Kafka's ``CheckpointFile`` creates it without a sync; so do we: an absent file and an empty one
        read the same (no entries), so a crash at any point leaves a valid state, and creating a
        partition costs no fsync here (a topic of 1,000 partitions would pay 2,000).
        """
        if self._persist:
            (self._directory / LEADER_EPOCH_CHECKPOINT).touch(exist_ok=True)

    def _write(self) -> None:
        if self._persist:
            write_leader_epoch_checkpoint(self._directory, self._entries)
        self._unflushed = False
        self._version += 1

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self._directory}, {self._entries})"

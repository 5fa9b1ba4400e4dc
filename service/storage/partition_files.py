"""The broker files of a partition dir beside its segments: producer snapshots, the leader-epoch
checkpoint and ``partition.metadata`` — loaded with the log, kept up to date as it changes.

Loading (after the segments are loaded and recovered, so the log end offset is known):

- producer state: snapshots above the log end offset go (a recovery cut the log below them), and so do
  snapshots that name no segment, except the newest one when it lies above the last segment's base (the
  one taken at the log end offset on close). The newest readable snapshot at or below the log end offset
  (recovered, after an unclean stop: Kafka's ``truncateAndReload``) is loaded and only the batches after it
  are replayed, so a producer whose batches retention deleted is kept (KIP-360: only
  ``producer.id.expiration.ms`` expires one); a snapshot with a bad CRC or version is logged, deleted
  (Kafka's ``removeAndDeleteSnapshot``) and the next older one tried, down to a replay of the whole log;
- leader epochs: the checkpoint is read; a missing one starts empty; a corrupt one is logged and rebuilt
  from the partition leader epochs of the batches. Entries past the log end or below the log start offset
  are cut (Kafka ``truncateFromEnd`` / ``truncateFromStart``) and the file written;
- ``partition.metadata`` is read and kept as it is; a malformed one is logged and the partition loads
  without a topic id.

Three of those reads wait for their first use, as Kafka's lazy files do, so that a clean start-up costs a
listing and the active segment's checks per partition, and an unclean one the recovery (``DeferredFiles``):
the topic id (``partition.metadata``), the leader-epoch checkpoint when it exists (read, and cut to the
log's offsets as they are then: ``load_leader_epoch_cache``), and the producer snapshot at the log end
offset when the listing has it and it is the recovery point, so that nothing is replayed after it (stray
snapshots are still deleted at load, from the listing; ``read_deferred_producer_state`` falls back to
``load_producer_state`` if the snapshot turns out unreadable). What the log reads then is what the load
would have read: recovery has finished, and nothing changes the files before the log does.

A read-only load (``read_only``, the inspections) defers the same reads, and
neither it nor those reads at first use write: no snapshot is deleted (strays and unreadable snapshots are
passed over) and no checkpoint written (the epoch cache is kept in memory only, truncated as a load
would). ``explain`` reads the topic id and the producer state (its ``last_stable_offset``), never the
epochs; ``retention --dry-run`` reads none of the three.

While the log runs: a snapshot at each roll (named by the new segment's base offset) and on close (at the
log end offset); the snapshot named by a segment retention deletes is renamed ``.snapshot.deleted`` with
the segment's files and removed with them after ``file.delete.delay.ms``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from service.base.errors import CorruptDataError
from service.storage.atomic import fsync_dir
from service.storage.leader_epoch_cache import LeaderEpochCache
from service.storage.leader_epoch_checkpoint import LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint
from service.storage.log_files import DELETED_SUFFIX, SNAPSHOT_SUFFIX, file_name
from service.storage.partition_metadata import (
    PARTITION_METADATA_FILE,
    new_topic_id,
    read_partition_metadata,
    write_partition_metadata,
)
from service.storage.producer_snapshot import (
    list_snapshot_offsets,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)
from service.storage.producer_state import ProducerStateManager
from service.storage.segment import LogSegment

__all__ = [
    "NOTHING_DEFERRED",
    "DeferredFiles",
    "LoadedPartitionFiles",
    "create_partition_metadata",
    "delete_marked_snapshot",
    "load_leader_epoch_cache",
    "load_partition_files",
    "load_producer_state",
    "load_topic_id",
    "mark_snapshot_deleted",
    "read_deferred_producer_state",
    "take_snapshot",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DeferredFiles:
    """Which files a clean load left for the log to read on first use (see the module docstring)."""

    producer_snapshot: bool = False  # the snapshot at the log end offset
    leader_epoch_checkpoint: bool = False
    partition_metadata: bool = False
    read_only: bool = False  # a read-only load's: reading them at first use writes nothing either


NOTHING_DEFERRED = DeferredFiles()
# One shared instance per combination: no object per partition.
_DEFERRED = {
    (snapshot, epochs, metadata, read_only): DeferredFiles(snapshot, epochs, metadata, read_only)
    for snapshot in (False, True)
    for epochs in (False, True)
    for metadata in (False, True)
    for read_only in (False, True)
}


class LoadedPartitionFiles(NamedTuple):
    """What was read at load; a file ``deferred`` names was not read (its field holds an empty value)."""

    producer_state: ProducerStateManager | None
    leader_epochs: LeaderEpochCache | None
    topic_id: str | None
    deferred: DeferredFiles = NOTHING_DEFERRED


def load_partition_files(
    directory: Path,
    segments: Sequence[LogSegment],
    *,
    log_start_offset: int,
    log_end_offset: int,
    recovery_point: int,
    names: Iterable[str],
    read_only: bool = False,
    snapshot_offsets: Sequence[int] | None = None,
    topic_id: str | None = None,
) -> LoadedPartitionFiles:
    """What the loader hands the log besides its segments (steps in the module docstring), the reads the
    module docstring lists deferred; ``names`` is the dir's listing (its snapshot names current), so it is
    not listed again; a ``read_only`` load's deferred reads write nothing at first use either
    (``DeferredFiles.read_only``).
    ``snapshot_offsets``: the snapshots among ``names``, sorted, if the caller found them already.
    ``topic_id``: the one the start-up's stray-replica survey read from this dir's ``partition.metadata``
    (None: not read, or none there): the file is then not read again."""
    names = names if isinstance(names, (list, set, frozenset)) else list(names)
    offsets = _remove_stray_snapshots(
        directory, segments, log_end_offset, names, read_only=read_only, snapshot_offsets=snapshot_offsets
    )
    defer_snapshot = bool(offsets) and offsets[-1] == log_end_offset == recovery_point
    producer_state = None
    if not defer_snapshot:
        producer_state = _restore_producer_state(
            directory, segments, offsets, log_end_offset, recovery_point, read_only=read_only
        )
    defer_epochs = LEADER_EPOCH_CHECKPOINT in names
    leader_epochs = None
    if not defer_epochs:
        leader_epochs = load_leader_epoch_cache(
            directory,
            segments,
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
            read_only=read_only,
        )
    defer_metadata = topic_id is None and PARTITION_METADATA_FILE in names
    return LoadedPartitionFiles(
        producer_state,
        leader_epochs,
        topic_id,
        _DEFERRED[defer_snapshot, defer_epochs, defer_metadata, read_only],
    )


# -- producer snapshots ---------------------------------------------------------------------------------


def load_producer_state(
    directory: Path,
    segments: Sequence[LogSegment],
    *,
    log_end_offset: int,
    recovery_point: int,
    names: Iterable[str] | None = None,
    read_only: bool = False,
) -> ProducerStateManager:
    """The producer state at the log end offset: the newest good snapshot ≤ the recovery point, then the
    batches after it (none to read when that snapshot is at the log end offset, as a clean close leaves)."""
    offsets = _remove_stray_snapshots(directory, segments, log_end_offset, names, read_only=read_only)
    return _restore_producer_state(
        directory, segments, offsets, log_end_offset, recovery_point, read_only=read_only
    )


def read_deferred_producer_state(
    directory: Path,
    segments: Sequence[LogSegment],
    log_end_offset: int,
    *,
    read_only: bool = False,
    dir_text: str | None = None,
) -> ProducerStateManager:
    """The producer state of a clean load that deferred it: the snapshot at the log end offset, read now.

    If it cannot be read any more (corrupt, or gone), ``load_producer_state`` runs as the load would have:
    the next older snapshot, or a replay of the segments (those the log holds now); ``read_only``: the
    corrupt snapshot and any stray stay where they are. ``dir_text``: ``directory``'s text, if the caller
    has it (a Path's text costs more to make than the file costs to read).
    """
    snapshot = file_name(log_end_offset, SNAPSHOT_SUFFIX)  # no Path: read per log
    path = os.path.join(directory if dir_text is None else dir_text, snapshot)
    state = ProducerStateManager()
    try:
        state.load_entries(read_snapshot(path))
    except (CorruptDataError, FileNotFoundError) as exc:
        logger.error("%s; rebuilding the producer state from the segments instead", exc)
        if isinstance(exc, CorruptDataError) and not read_only:
            _delete_corrupt_snapshot(Path(path))
        return load_producer_state(
            directory,
            segments,
            log_end_offset=log_end_offset,
            recovery_point=log_end_offset,
            read_only=read_only,
        )
    return state


def _delete_corrupt_snapshot(path: Path) -> None:
    """Kafka's ``removeAndDeleteSnapshot``, durably: a crash must not bring back a snapshot the state no
    longer comes from."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        fsync_dir(path.parent)


def _restore_producer_state(
    directory: Path,
    segments: Sequence[LogSegment],
    offsets: list[int],
    log_end_offset: int,
    recovery_point: int,
    *,
    read_only: bool = False,
) -> ProducerStateManager:
    """``load_producer_state`` once the stray snapshots are gone (``offsets``: the snapshots left).

    Any snapshot up to the log end offset serves, also above ``recovery_point``: the segments up to the
    log end offset are recovered by now, and an older snapshot may predate batches that retention has
    deleted since (their producers would be lost)."""
    state = ProducerStateManager()
    start = None
    for offset in reversed([o for o in offsets if o <= log_end_offset]):
        path = snapshot_path(directory, offset)
        try:
            state.load_entries(read_snapshot(path))
        except CorruptDataError as exc:
            logger.error("%s; rebuilding the producer state from the segments instead", exc)
            if not read_only:
                _delete_corrupt_snapshot(path)
            continue
        start = offset
        break
    replayed = 0 if start == log_end_offset else _replay(segments, state, start)
    if replayed:
        logger.info(
            "%s: producer state rebuilt from %d batches after %s",
            directory,
            replayed,
            "the start of the log" if start is None else f"snapshot {start}",
        )
    return state


def _remove_stray_snapshots(
    directory: Path,
    segments: Sequence[LogSegment],
    log_end_offset: int,
    names: Iterable[str] | None,
    *,
    read_only: bool,
    snapshot_offsets: Sequence[int] | None = None,
) -> list[int]:
    offsets = list_snapshot_offsets(directory, names) if snapshot_offsets is None else list(snapshot_offsets)
    bases = {s.base_offset for s in segments}
    last_base = segments[-1].base_offset if segments else 0
    strays = [o for o in offsets if o not in bases and o <= log_end_offset]
    keep = strays[-1] if strays and strays[-1] > last_base else None
    kept = []
    for offset in offsets:
        if offset > log_end_offset or (offset not in bases and offset != keep):
            if not read_only:
                logger.info("Deleting %s: it names no segment of the log", snapshot_path(directory, offset))
                snapshot_path(directory, offset).unlink(missing_ok=True)
        else:
            kept.append(offset)
    return kept


def _replay(segments: Sequence[LogSegment], state: ProducerStateManager, start: int | None) -> int:
    replayed = 0
    for i, segment in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if start is not None and next_base is not None and next_base <= start:
            continue
        batches = segment.batches() if start is None else segment.read_from(start)
        for batch in batches:
            if start is None or batch.base_offset >= start:
                state.on_batch(batch)
                replayed += 1
        segment.close_file()
    return replayed


def take_snapshot(directory: Path, offset: int, state: ProducerStateManager) -> None:
    """Write the snapshot ending at ``offset`` (the log end offset), unless it is there already."""
    if snapshot_path(directory, offset).exists():
        return
    write_snapshot(directory, offset, state.snapshot_entries())


def mark_snapshot_deleted(directory: Path, offset: int) -> None:
    """Rename the snapshot named by a deleted segment to ``.snapshot.deleted`` (gone at the next load)."""
    path = snapshot_path(directory, offset)
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, path.with_name(path.name + DELETED_SUFFIX))


def delete_marked_snapshot(directory: Path, offset: int) -> None:
    path = snapshot_path(directory, offset)
    path.with_name(path.name + DELETED_SUFFIX).unlink(missing_ok=True)


# -- leader epochs -----------------------------------------------------------------------------------


def load_leader_epoch_cache(
    directory: Path,
    segments: Sequence[LogSegment],
    *,
    log_start_offset: int,
    log_end_offset: int,
    read_only: bool = False,
    flush_truncation: bool = True,
) -> LeaderEpochCache:
    """``flush_truncation`` False: cutting the entries to the log's offsets leaves the file to the log's next
    flush of its epochs (a first use after a clean load, or any unclean load: the file's older entries are
    cut again at any later load, so a crash before that loses nothing)."""
    persist = not read_only
    try:
        entries = read_leader_epoch_checkpoint(directory)
    except CorruptDataError as exc:
        logger.error("%s; rebuilding the leader epoch cache from the batches", exc)
        cache = LeaderEpochCache(directory, persist=persist)
        for segment in segments:
            for batch in segment.batches():
                cache.assign(batch.partition_leader_epoch, batch.base_offset)
            segment.close_file()
        cache.write()
    else:
        cache = LeaderEpochCache(directory, entries or (), persist=persist)
        if entries is None:
            cache.create_file()
    cache.truncate_from_end(log_end_offset, flush=flush_truncation)
    cache.truncate_from_start(log_start_offset, flush=flush_truncation)
    return cache


# -- partition.metadata -------------------------------------------------------------------------------


def load_topic_id(directory: Path) -> str | None:
    """The topic id of ``partition.metadata``, or None when it is missing or malformed (logged)."""
    try:
        metadata = read_partition_metadata(directory)
    except CorruptDataError as exc:
        logger.error("%s; the partition loads without a topic id", exc)
        return None
    return None if metadata is None else metadata.topic_id


def create_partition_metadata(directory: Path, topic_id: str | None) -> str:
    """Write ``partition.metadata`` of a new partition (a fresh id unless the topic has one)."""
    return write_partition_metadata(directory, topic_id or new_topic_id()).topic_id

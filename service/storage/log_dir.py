"""Opening and closing a whole log dir (one entry of ``log.dirs``), as Kafka's LogManager does at start-up
and shutdown (``LogManager.loadLogs`` and ``shutdown``): the clean-shutdown marker, both offset
checkpoints, and every partition dir loaded, one after another on the calling thread.

Kafka loads a dir's partitions on ``num.recovery.threads.per.data.dir`` threads; here that key sets only the
threads that close them at the stop (their time is fsyncs, which release the GIL). A load is Python work
between small system calls, each of which hands the GIL over: two threads loading 10,000 small partitions
took 1.7–2 times as long as one, after a clean stop and after an unclean one (``docs/operations.md``).

A read-only load (``read_only``, for the inspection commands) writes nothing into the dir: the marker stays,
no dir is created, and each partition is read in place unless loading it would write (recovery, a swap, an
index rebuild: ``WouldWriteError``); that one is loaded from the copy ``read_only.copy`` makes of it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from service.base.clock import Clock
from service.base.errors import InvalidInputError, LogCleanerError, WouldWriteError
from service.storage.checkpoints import OffsetCheckpointFile
from service.storage.clean_shutdown import (
    NO_BROKER_EPOCH,
    read_clean_shutdown_marker,
    remove_clean_shutdown_marker,
    write_clean_shutdown_marker,
)
from service.storage.high_watermark_checkpoint import (
    HighWatermarks,
    read_high_watermarks,
    write_high_watermark_checkpoint,
)
from service.storage.load_progress import LoadProgress
from service.storage.loader import LoadResult, load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.log_files import (
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES_FILE,
    METADATA_TOPIC,
    RECOVERY_POINT_CHECKPOINT,
    parse_partition_dir_name,
)
from service.storage.prescan import LogDirPrescan, has_dirscan
from service.storage.topic_partition import TopicPartition

__all__ = [
    "FailedPartition",
    "LoadInterruptedError",
    "LoadedLogDir",
    "PartitionCopier",
    "close_log_dir",
    "load_log_dir",
    "write_log_start_offset_checkpoint",
    "write_offset_checkpoints",
    "write_recovery_point_checkpoint",
]

logger = logging.getLogger(__name__)


class LoadInterruptedError(LogCleanerError):
    """A stop was requested while the dir loaded: loading ended at the next partition, nothing more was
    written, and the clean-shutdown marker is gone, so the next start recovers (as after a kill)."""


class PartitionCopier(Protocol):
    """Makes a scratch copy of a partition dir that a read-only load may write into."""

    def copy(self, directory: Path, *, every_log: bool) -> Path:
        """A copy of ``directory`` (same name); ``every_log``: copy every ``.log`` (recovery may cut any)."""
        ...

    def selects(self, name: str) -> bool:
        """Whether the inspection reads the partition dir ``name`` (one split over processes reads only its
        share of the dirs)."""
        ...

    def surveys(self, topic: str) -> bool:
        """Whether the stray-replica survey reads ``topic``'s partition dirs: those of a topic with a dir in
        the share (a topic's stray replicas are decided over all of its dirs, and no others)."""
        ...


@dataclass(frozen=True, slots=True)
class FailedPartition:
    """A partition dir whose load failed: left out, its records untouched, until an operator repairs it.

    ``log_start_offset`` is its checkpointed one, written back with the dir's checkpoints so that a
    repaired partition comes back with it. Its recovery point is not written back: a partition missing
    from the recovery-point checkpoint is recovered at its next load, whatever the clean-shutdown marker.
    """

    topic_partition: TopicPartition
    path: Path
    reason: str
    log_start_offset: int = 0


@dataclass(slots=True)
class LoadedLogDir:
    """The live logs of one log dir after loading, and the partition dirs awaiting deletion."""

    path: Path
    logs: dict[TopicPartition, PartitionLog]
    had_clean_shutdown: bool
    pending_deletion: list[Path] = field(default_factory=list)
    recovered_segments: int = 0
    truncated_bytes: int = 0
    failed: list[FailedPartition] = field(default_factory=list)
    # ``replication-offset-checkpoint`` entries of partitions not loaded here, written back unchanged.
    kept_high_watermarks: dict[TopicPartition, int] = field(default_factory=dict)
    # The marker's broker epoch at load, written back at close (Kafka reads it at its next start).
    broker_epoch: int = NO_BROKER_EPOCH


def load_log_dir(
    path: Path,
    config_for: Callable[[str], LogConfig],
    *,
    clock: Clock,
    progress: LoadProgress | None = None,
    stop: threading.Event | None = None,
    read_only: PartitionCopier | None = None,
    prescan: LogDirPrescan | None = None,
    strays: Collection[Path] = (),
    led_alone: Collection[TopicPartition] = frozenset(),
    topic_ids: Mapping[str, str | None] | None = None,
) -> LoadedLogDir:
    """Load every partition of ``path`` but the ``strays`` (dirs left as they are); the clean-shutdown
    marker is honoured, then removed (kept, and nothing written, when ``read_only`` is given: see the
    module docstring).

    High watermarks: a partition this node leads alone (``led_alone``, from the broker's metadata; every
    partition of a dir no broker wrote ``meta.properties`` into, whose only replica is logcleaner) starts at
    its log end, as Kafka's leader does; any other at the dir's ``replication-offset-checkpoint``.

    ``progress`` counts the logs found and loaded, for a start-up that reports how far it is. Once ``stop``
    is set, no further partition starts loading: ``LoadInterruptedError``. The caller holds the dir's lock
    (unless ``read_only``); after a clean shutdown the partition dirs are scanned ahead of their loads on a
    thread (``service.storage.prescan``), by ``prescan`` if the caller started one under that lock, a
    read-only load's too.
    ``topic_ids``: each partition dir's topic id as the stray-replica survey read it (by dir name), which
    its log takes instead of reading ``partition.metadata`` again."""
    try:
        return _load_log_dir(
            path,
            config_for,
            clock=clock,
            progress=progress,
            stop=stop,
            read_only=read_only,
            prescan=prescan,
            strays=strays,
            led_alone=led_alone,
            topic_ids=topic_ids or {},
        )
    finally:
        if prescan is not None:
            prescan.close()


def _load_log_dir(
    path: Path,
    config_for: Callable[[str], LogConfig],
    *,
    clock: Clock,
    progress: LoadProgress | None,
    stop: threading.Event | None,
    read_only: PartitionCopier | None,
    prescan: LogDirPrescan | None,
    strays: Collection[Path],
    led_alone: Collection[TopicPartition],
    topic_ids: Mapping[str, str | None],
) -> LoadedLogDir:
    """``load_log_dir`` but for closing the prescan: the marker, the checkpoints, the partition dirs listed,
    then loaded (Kafka's ``LogManager.loadLogs``), and the timing logged."""
    began = time.monotonic()
    path = path.resolve()
    if read_only is None:
        path.mkdir(parents=True, exist_ok=True)
    high_watermarks = read_high_watermarks(path)  # malformed: stop before the marker goes
    marker_epoch = read_clean_shutdown_marker(path)
    clean = marker_epoch is not None
    if clean and read_only is None:
        remove_clean_shutdown_marker(path)
        logger.info("%s was shut down cleanly: skipping recovery", path)
    recovery_points = _read_checkpoint(path / RECOVERY_POINT_CHECKPOINT)
    start_offsets = _read_checkpoint(path / LOG_START_OFFSET_CHECKPOINT)
    to_load, pending_deletion = _partition_dirs(path, read_only, strays)
    if progress is not None:
        progress.found(len(to_load))
    prescan = _prescan_for(path, prescan, to_load, clean=clean, read_only=read_only)
    listed = time.monotonic()
    load = _PartitionLoader(
        path,
        config_for,
        clock,
        clean,
        recovery_points,
        start_offsets,
        high_watermarks,
        not (path / META_PROPERTIES_FILE).is_file(),
        frozenset(led_alone),
        progress,
        stop,
        read_only,
        prescan,
        topic_ids,
    )
    results = _load_all(load, to_load, prescan)
    loaded = _loaded_log_dir(path, results, clean, pending_deletion, marker_epoch, high_watermarks)
    logger.info(
        "%s: checkpoints read and %d partition dirs listed in %.2f s; loaded (recovery included: %d "
        "segments) in %.2f s",
        path,
        len(to_load),
        listed - began,
        loaded.recovered_segments,
        time.monotonic() - listed,
    )
    return loaded


def _partition_dirs(
    path: Path, read_only: PartitionCopier | None, strays: Collection[Path]
) -> tuple[list[tuple[Path, TopicPartition]], list[Path]]:
    """The partition dirs to load, in name order, and those awaiting deletion (``-delete``); the metadata
    log, future and stray replicas and other dirs are left as they are, as in Kafka's ``loadLogs``."""
    to_load: list[tuple[Path, TopicPartition]] = []
    pending_deletion = []
    with os.scandir(path) as entries:  # the entry's type comes with the listing: no stat per child
        child_names = sorted(e.name for e in entries if e.is_dir())
    for name in child_names:
        try:
            parsed = parse_partition_dir_name(name)
        except InvalidInputError:
            logger.warning("Skipping %s: not a partition dir name", path / name)
            continue
        if parsed.topic == METADATA_TOPIC:  # the broker's Raft layer owns it, as in Kafka's loadLogs
            level = logging.DEBUG if name == f"{METADATA_TOPIC}-0" else logging.WARNING
            logger.log(level, "Skipping %s: a dir of the KRaft metadata log, not managed here", path / name)
        elif parsed.kind == "delete":
            pending_deletion.append(path / name)
        elif parsed.kind == "":
            # A Path only for a dir loaded here (a share of an inspection loads a few of them).
            if read_only is None or read_only.selects(name):
                child = path / name
                if child not in strays:  # a stray replica: not this topic's log (``stray_replicas``)
                    to_load.append((child, TopicPartition(parsed.topic, parsed.partition)))
        else:
            logger.info("Skipping %s: a %s replica is not managed here", path / name, parsed.kind)
    return to_load, pending_deletion


def _prescan_for(
    path: Path,
    prescan: LogDirPrescan | None,
    to_load: list[tuple[Path, TopicPartition]],
    *,
    clean: bool,
    read_only: PartitionCopier | None,
) -> LogDirPrescan | None:
    """The prescan the loads take their dirs from: only after a clean shutdown (recovery reads every file
    itself); started here if the caller started none and the native scanner is there, for a read-only
    load too (the marker says no process has the dir open: ``service.storage.prescan``)."""
    if prescan is not None and not clean:
        prescan.close()
        return None
    if prescan is None and clean and has_dirscan():
        names = [directory.name for directory, _ in to_load]
        return LogDirPrescan(path, names, time_edges=read_only is not None).start()
    return prescan


@dataclass(slots=True)
class _PartitionLoader:
    """Loads one partition dir of a log dir, with what the dir's checkpoints say of it. A partition whose
    load fails for any reason but the disk is left out."""

    path: Path
    config_for: Callable[[str], LogConfig]
    clock: Clock
    clean: bool
    recovery_points: Mapping[TopicPartition, int]
    start_offsets: Mapping[TopicPartition, int]
    high_watermarks: HighWatermarks
    is_own_dir: bool  # no broker's meta.properties: logcleaner made the dir, the only replica of its logs
    led_alone: frozenset[TopicPartition]
    progress: LoadProgress | None
    stop: threading.Event | None
    read_only: PartitionCopier | None
    prescan: LogDirPrescan | None
    topic_ids: Mapping[str, str | None]  # by partition dir name, as the stray-replica survey read them
    configs: dict[str, LogConfig] = field(default_factory=dict)  # one resolution per topic

    def __call__(self, item: tuple[Path, TopicPartition]) -> LoadResult | FailedPartition:
        directory, tp = item
        if self.stop is not None and self.stop.is_set():
            raise LoadInterruptedError(f"loading {self.path} was interrupted by a stop before {tp}")
        # A partition the checkpoint does not know (it failed to load last time) is recovered.
        recovery_point = self.recovery_points.get(tp)
        clean_shutdown = self.clean and recovery_point is not None
        log_start_offset = self.start_offsets.get(tp, 0) if self.start_offsets else 0
        name = directory.name
        scan = self.prescan.take(name) if self.prescan is not None else None
        leads_alone = self.is_own_dir or tp in self.led_alone
        high_watermark, high_watermark_source = self.high_watermarks.for_partition(
            tp, leads_alone=leads_alone
        )

        def load_from(source: Path, *, in_place: bool) -> LoadResult:
            return load_partition_log(
                source,
                self._config_of(tp.topic),
                clock=self.clock,
                log_start_offset=log_start_offset,
                recovery_point=recovery_point or 0,
                clean_shutdown=clean_shutdown,
                read_only=in_place and self.read_only is not None,
                topic_partition=tp,
                scan=scan if in_place else None,
                high_watermark=high_watermark,
                high_watermark_source=high_watermark_source,
                topic_id=self.topic_ids.get(name),
                log_dir=self.path if in_place else None,
            )

        try:
            result: LoadResult | FailedPartition
            try:
                result = load_from(directory, in_place=True)
            except WouldWriteError as would_write:
                if self.read_only is None:
                    raise
                logger.debug("Reading a copy of %s: %s", directory, would_write)
                copy = self.read_only.copy(directory, every_log=not clean_shutdown)
                result = load_from(copy, in_place=False)
        except OSError:
            raise  # the disk failing: the whole dir goes offline (the caller)
        except Exception as exc:  # anything else costs this partition only
            result = _failed(tp, directory, exc, log_start_offset)
        if self.progress is not None:
            self.progress.loaded_one()  # a partition that failed to load is done with too
        return result

    def _config_of(self, topic: str) -> LogConfig:
        config = self.configs.get(topic)
        if config is None:
            config = self.configs[topic] = self.config_for(topic)
        return config


def _load_all(
    load: _PartitionLoader, to_load: list[tuple[Path, TopicPartition]], prescan: LogDirPrescan | None
) -> list[LoadResult | FailedPartition]:
    """Every partition loaded, in order, on the calling thread (the module docstring says why)."""
    try:
        return [load(item) for item in to_load]
    finally:
        if prescan is not None:
            prescan.close()


def _loaded_log_dir(
    path: Path,
    results: list[LoadResult | FailedPartition],
    clean: bool,
    pending_deletion: list[Path],
    marker_epoch: int | None,
    high_watermarks: HighWatermarks,
) -> LoadedLogDir:
    """The dir's loaded logs and failed partitions, with the totals of their recovery."""
    loaded_logs = [r for r in results if isinstance(r, LoadResult)]
    loaded = LoadedLogDir(path, {r.log.topic_partition: r.log for r in loaded_logs}, clean, pending_deletion)
    loaded.broker_epoch = NO_BROKER_EPOCH if marker_epoch is None else marker_epoch
    loaded.recovered_segments = sum(r.recovered_segments for r in loaded_logs)
    loaded.truncated_bytes = sum(r.truncated_bytes for r in loaded_logs)
    loaded.failed = [r for r in results if isinstance(r, FailedPartition)]
    loaded.kept_high_watermarks = high_watermarks.not_managed(loaded.logs)
    return loaded


def _failed(tp: TopicPartition, directory: Path, exc: Exception, log_start_offset: int) -> FailedPartition:
    """Log why ``directory`` failed to load (a traceback only for an error we did not foresee)."""
    known = isinstance(exc, LogCleanerError)
    reason = str(exc) if known else f"{type(exc).__name__}: {exc}"
    logger.error(
        "Partition %s in %s failed to load and is left out (the other partitions are served): %s",
        tp,
        directory,
        reason,
        exc_info=None if known else exc,
    )
    return FailedPartition(tp, directory, reason, log_start_offset)


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    try:
        return OffsetCheckpointFile(path).read()
    except (OSError, ValueError) as exc:
        logger.error("Could not read %s, treating it as empty: %s", path, exc)
        return {}


def write_recovery_point_checkpoint(
    path: Path, logs: Iterable[PartitionLog], unmanaged: Collection[TopicPartition] = ()
) -> None:
    """``recovery-point-offset-checkpoint``: every log of the dir → its recovery point; the ``unmanaged``
    logs' entries (a broker's ``-future`` and stray replicas) are carried over unchanged."""
    OffsetCheckpointFile(path / RECOVERY_POINT_CHECKPOINT).write(
        {log.topic_partition: log.recovery_point for log in logs}, carry_over=unmanaged
    )


def write_log_start_offset_checkpoint(
    path: Path,
    logs: Iterable[PartitionLog],
    failed: Iterable[FailedPartition] = (),
    unmanaged: Collection[TopicPartition] = (),
) -> None:
    """``log-start-offset-checkpoint``: only logs whose start offset is above their first segment (Kafka),
    and the partitions that failed to load keep theirs, as do the ``unmanaged`` logs."""
    offsets = {f.topic_partition: f.log_start_offset for f in failed if f.log_start_offset > 0}
    snapshots = [(log.topic_partition, log.snapshot) for log in logs]  # no log's lock: retention may hold it
    offsets.update(
        (tp, snapshot.log_start_offset)
        for tp, snapshot in snapshots
        if snapshot.log_start_offset > snapshot.segments[0].base_offset
    )
    OffsetCheckpointFile(path / LOG_START_OFFSET_CHECKPOINT).write(offsets, carry_over=unmanaged)


def write_offset_checkpoints(
    path: Path,
    logs: Iterable[PartitionLog],
    failed: Iterable[FailedPartition] = (),
    kept_high_watermarks: Mapping[TopicPartition, int] | None = None,
    unmanaged: Collection[TopicPartition] = (),
) -> None:
    """The offset checkpoints of one log dir: recovery points, log start offsets and, unless
    ``kept_high_watermarks`` is None, the high watermarks (with those entries of partitions not loaded);
    ``unmanaged``: see ``write_recovery_point_checkpoint``."""
    logs = list(logs)
    write_recovery_point_checkpoint(path, logs, unmanaged)
    write_log_start_offset_checkpoint(path, logs, failed, unmanaged)
    if kept_high_watermarks is not None:
        write_high_watermark_checkpoint(path, logs, kept_high_watermarks)


def close_log_dir(
    loaded: LoadedLogDir,
    *,
    threads: int = 1,
    unmanaged: Collection[TopicPartition] = (),
) -> None:
    """Kafka's shutdown for one dir: close every log (on ``threads`` threads, as Kafka closes them on its
    recovery threads: a close's time is its fsyncs, which release the GIL), then write each checkpoint
    file once (the high watermarks too, as the broker's replica manager does at its shutdown; the
    ``unmanaged`` logs' entries carried over: a broker's ``-future`` and stray replicas), then the marker.
    Each phase's time is logged.

    As Kafka, the marker is written for a dir that had one at load or whose every log was recovered: a dir
    that came up without one and holds ``unmanaged`` logs or partitions that failed to load gets none, so
    the broker's next start recovers them (with it, the broker would skip recovery)."""
    began = time.monotonic()
    logs = list(loaded.logs.values())
    if threads <= 1:
        for log in logs:
            log.close()
    else:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="log-close") as pool:
            for _ in pool.map(lambda log: log.close(), logs):
                pass  # re-raises the first close that failed
    closed = time.monotonic()
    write_offset_checkpoints(loaded.path, logs, loaded.failed, loaded.kept_high_watermarks, unmanaged)
    unrecovered = sorted({*unmanaged, *(f.topic_partition for f in loaded.failed)})
    if loaded.had_clean_shutdown or not unrecovered:
        write_clean_shutdown_marker(loaded.path, loaded.broker_epoch)
    else:
        logger.warning(
            "%s: no clean-shutdown marker written: the dir came up without one and holds logs logcleaner "
            "did not recover (%s), which the broker's next start must recover",
            loaded.path,
            ", ".join(str(tp) for tp in unrecovered),
        )
    logger.info(
        "%s: %d logs flushed and closed in %.2f s on %d thread(s); checkpoints and marker written in %.2f s",
        loaded.path,
        len(logs),
        closed - began,
        threads,
        time.monotonic() - closed,
    )

"""The LogManager (Kafka ``LogManager``): every partition log under ``log.dirs``.

Start-up sets stray replicas aside (``service.core.stray_replicas``: never loaded, changed or deleted), then
locks each dir and loads it (a dir that fails with an I/O error goes offline, the others go on); the
periodic tasks' bodies live here (retention, flush, both offset checkpoints, partition-dir deletion, and
the high watermarks that Kafka's ``ReplicaManager`` checkpoints) and the scheduler only calls them;
shutdown closes every log and writes the checkpoints and the clean-shutdown marker. A dir's logs that
logcleaner does not manage (``-future`` and stray replicas) keep their checkpoint lines. ``_lock`` guards
``_logs``, ``_offline_logs``, ``_strays``, ``_dirs`` and ``_delete_queue``; each log guards itself;
``_deletions_lock`` guards the running count of segments retention deleted, by reason (for the metrics).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from service.base.audit import audit_log, log_ident, segment_description
from service.base.clock import Clock
from service.base.errors import (
    ConflictError,
    CorruptDataError,
    InvalidInputError,
    LogClosedError,
    LogDirOfflineError,
    NotFoundError,
)
from service.base.wording import counted
from service.core.collector import collector_paused
from service.core.ports import CleaningControl, TaskScheduler
from service.core.retention import RetentionReason, plan_retention
from service.core.stray_replicas import (
    KnownTopics,
    StrayReplica,
    find_stray_replicas,
    survey_replica_dirs,
    unmanaged_partitions,
)
from service.storage.atomic import fsync_dir
from service.storage.clean_shutdown import NO_BROKER_EPOCH
from service.storage.dir_lock import LogDirLock
from service.storage.duplicate_dirs import check_no_duplicate_partition_dirs
from service.storage.high_watermark_checkpoint import write_high_watermark_checkpoint
from service.storage.leader_epoch_flush import flush_leader_epochs_in_batch
from service.storage.load_progress import LoadProgress
from service.storage.loader import load_partition_log
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.log_dir import (
    FailedPartition,
    LoadedLogDir,
    PartitionCopier,
    close_log_dir,
    load_log_dir,
    write_log_start_offset_checkpoint,
    write_offset_checkpoints,
    write_recovery_point_checkpoint,
)
from service.storage.log_files import (
    DELETE_DIR_SUFFIX,
    METADATA_TOPIC,
    METADATA_TOPIC_CREATION_PROHIBITED,
    is_valid_topic_name,
    partition_dir_name,
)
from service.storage.partition_files import create_partition_metadata, delete_marked_snapshot
from service.storage.partition_metadata import new_topic_id
from service.storage.prescan import EarlyPrescans, LogDirPrescan
from service.storage.segment import TIMESTAMP_SOURCE_MTIME, LogSegment
from service.storage.topic_partition import TopicPartition

__all__ = ["DeletedSegment", "LogManager", "LogManagerSettings"]

logger = logging.getLogger(__name__)

_MAX_DIR_NAME = 255
_CREATE_PARTITION_THREADS = 16  # concurrent fsyncs the file system can batch (partition creation)


@dataclass(frozen=True, slots=True)
class LogManagerSettings:
    recovery_threads_per_dir: int = 1
    cleaner_enabled: bool = True
    log_segment_delete_delay_ms: int = 60_000  # the broker default: whole partition dirs wait this long


@dataclass(frozen=True, slots=True)
class DeletedSegment:
    topic: str
    partition: int
    base_offset: int
    size_bytes: int
    reason: RetentionReason


@dataclass(slots=True)
class _LogDirState:
    path: Path
    lock: LogDirLock | None = None
    offline_reason: str | None = None
    had_clean_shutdown: bool = False
    # ``replication-offset-checkpoint`` entries of partitions not managed here; guarded by the manager's
    # ``_checkpoint_lock`` (the topic deletion that drops one writes the file under it too).
    kept_high_watermarks: dict[TopicPartition, int] = field(default_factory=dict)
    broker_epoch: int = NO_BROKER_EPOCH  # the clean-shutdown marker's at load, written back at shutdown
    # Logs of the dir that logcleaner does not manage (-future and stray replicas): their checkpoint
    # entries are carried over, and an unclean start leaves them unrecovered (no marker at shutdown).
    unmanaged: frozenset[TopicPartition] = frozenset()


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[Path],
        config_for: Callable[[str], LogConfig],
        *,
        clock: Clock,
        scheduler: TaskScheduler,
        settings: LogManagerSettings = LogManagerSettings(),
        read_only: PartitionCopier | None = None,
        known_topics: KnownTopics | None = None,
        cleaning: CleaningControl | None = None,
    ) -> None:
        """``read_only``: an inspection's manager, which writes nothing into its log dirs (no lock, no
        marker, no checkpoint; a partition whose load would write is read from a copy ``read_only`` makes),
        and whose shutdown only releases files. ``known_topics``: the broker's metadata, which then alone
        decides which replicas are stray (``service.core.stray_replicas``). ``cleaning``: the log cleaner's
        control of the compacted logs (Kafka's LogManager owns its LogCleaner); None without a cleaner."""
        self.known_topics = known_topics
        self.config_for = config_for
        self.read_only = read_only
        self.clock = clock
        self.scheduler = scheduler
        self.settings = settings
        self._dirs = [_LogDirState(Path(p).resolve()) for p in log_dirs]
        self._logs: dict[TopicPartition, PartitionLog] = {}
        # Logs of offline dirs: still listed (marked offline), never read or written until a restart.
        self._offline_logs: dict[TopicPartition, PartitionLog] = {}
        self._topic_admin_lock = threading.RLock()  # one topic creation or deletion at a time
        self._failed: dict[TopicPartition, FailedPartition] = {}  # left out at start-up
        self._strays: list[StrayReplica] = []  # found at start-up; never loaded, changed or deleted
        # Partitions with a ``-future`` replica in some log dir (a move between log dirs under way): never
        # cleaned until it is promoted, as Kafka's ReplicaManager pauses them (``abortAndPauseCleaning``).
        self._future_replicas: frozenset[TopicPartition] = frozenset()
        self._delete_queue: list[tuple[Path, int]] = []  # (renamed dir, time enqueued)
        # Logs loaded after an unclean stop whose leader-epoch checkpoints are yet to be cut and written.
        self._epochs_to_cut: list[PartitionLog] = []
        self._lock = threading.RLock()
        self.is_loaded = False
        self.load_progress = LoadProgress()  # read by /readyz and the metrics while start-up loads
        self.cleaning = cleaning
        self._retention_deletions: Counter[str] = Counter()
        self._deletions_lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()  # one writer per checkpoint file at a time (shared .tmp)
        self._stopping = threading.Event()  # set when the service stops: retention passes end early
        # A test seam: called with each log retention holds (its lock taken, nothing planned yet), so a
        # test can keep a pass in flight. None in production.
        self.on_retention_log: Callable[[PartitionLog], None] | None = None

    # -- start-up and shutdown -------------------------------------------------------------------

    def startup(
        self,
        stop: threading.Event | None = None,
        prescans: EarlyPrescans | None = None,
    ) -> None:
        """Lock and load every log dir; an I/O error takes only that dir offline. Once ``stop`` is set no
        further partition loads (``LoadInterruptedError``; the locks stay held until ``release_locks``).
        ``prescans``: dirs already locked and being scanned ahead (``serve``: ``start_early_prescans``);
        their locks and scans are taken over. The collector is paused meanwhile (``collector_paused``);
        ``serve`` freezes what its whole start-up made (``cli.serve``).
        A partition held by two dirs stops it first, before any lock or write (``duplicate_dirs``); a stray
        replica is set aside before that check, as Kafka's ``loadLog`` does
        (``service.core.stray_replicas``)."""
        strays, topic_ids = self._find_strays(prescans)
        check_no_duplicate_partition_dirs(
            (state.path for state in self._dirs), strays=[s.path for s in strays]
        )
        started: dict[Path, LogDirPrescan] = {}
        for state in self._dirs if self.read_only is None else ():
            early = prescans.take(state.path) if prescans is not None else None
            if early is not None:
                state.lock, started[state.path] = early
                continue
            try:
                state.path.mkdir(parents=True, exist_ok=True)
                state.lock = LogDirLock(state.path)
                state.lock.acquire()
            except ConflictError:
                self.release_locks()
                raise
            except OSError as exc:
                self._mark_offline(state, exc)
        try:
            with collector_paused():
                self._load_dirs(stop, started, strays, topic_ids)
        finally:
            for prescan in started.values():
                prescan.close()
        self.is_loaded = True
        self._warn_of_unknown_topic_configs()
        self._pause_cleaning_of_moving_partitions()
        if self._epochs_to_cut:
            self.scheduler.schedule_once("leader-epoch-cache-flush", 0, self._cut_recovered_leader_epochs)

    def has_future_replica(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is being moved between log dirs (its ``-future`` replica was found at start-up)."""
        return tp in self._future_replicas

    def _pause_cleaning_of_moving_partitions(self) -> None:
        """Kafka's ``ReplicaManager`` pauses the cleaning of a partition whose future replica exists until
        that replica is promoted (``abortAndPauseCleaning``); the pause holds until a restart finds none.
        Like any paused partition, the retention task passes it over too (Kafka's ``cleanupLogs``)."""
        if self.cleaning is None:
            return
        for tp in sorted(self._future_replicas & self.logs.keys(), key=lambda t: (t.topic, t.partition)):
            self.cleaning.abort_and_pause(tp, reason="future-replica")
            logger.info(
                "Cleaning of %s paused: its future replica (a move between log dirs) is in another dir; "
                "the broker promotes it, and a restart after that resumes cleaning",
                tp,
            )

    def topics_with_unknown_configs(self) -> list[str]:
        """The topics held because their configs are unknown (``LogConfig.configs_unknown``), sorted."""
        return sorted({tp.topic for tp, log in self.logs.items() if log.config.configs_unknown})

    def _warn_of_unknown_topic_configs(self) -> None:
        held = self.topics_with_unknown_configs()
        if held:
            logger.warning(
                "%s on a broker's dir without its metadata log: retention and the cleaner leave them alone "
                "(%s). Import them: kafka-configs.sh --describe --all --entity-type topics > FILE, then "
                "logcleaner topic-config --import FILE; or set unknown.topic.configs=broker-defaults",
                counted(len(held), "topic has unknown configs", "topics have unknown configs"),
                ", ".join(held[:5]) + (", ..." if len(held) > 5 else ""),
            )

    def _load_dirs(
        self,
        stop: threading.Event | None,
        prescans: dict[Path, LogDirPrescan],
        strays: list[StrayReplica],
        topic_ids: dict[Path, dict[str, str | None]],
    ) -> None:
        for state in self.online_dirs():
            in_dir = [s for s in strays if s.log_dir == state.path]
            try:
                loaded = load_log_dir(
                    state.path,
                    self.config_for,
                    clock=self.clock,
                    progress=self.load_progress,
                    stop=stop,
                    read_only=self.read_only,
                    prescan=prescans.get(state.path),
                    strays=[s.path for s in in_dir],
                    led_alone=self.known_topics.led_alone if self.known_topics is not None else (),
                    topic_ids=topic_ids.get(state.path),
                )
            except OSError as exc:
                self._mark_offline(state, exc)
                continue
            self._adopt(state, loaded)
            selected = [s for s in in_dir if self.read_only is None or self.read_only.selects(s.path.name)]
            for stray in selected:  # an inspection split over processes: each names its share's
                logger.warning(
                    "Stray replica %s in %s left alone (never retained, cleaned or deleted): %s",
                    stray.topic_partition,
                    stray.path,
                    stray.reason,
                )
            with self._lock:
                self._strays.extend(selected)

    def _find_strays(
        self, prescans: EarlyPrescans | None
    ) -> tuple[list[StrayReplica], dict[Path, dict[str, str | None]]]:
        """The stray replicas of every log dir (decided over all of them: a topic spans log dirs), and the
        topic id the survey read for each partition dir (by log dir, then dir name: its log takes it at
        load instead of reading the file again); each dir's unmanaged logs (strays and ``-future``
        replicas) are noted on its state. Reads only (the ``partition.metadata`` files ``prescans`` read
        early, under the dirs' locks, where it did); a dir that cannot be listed is left to its load,
        which reports it."""
        early = prescans.partition_metadata if prescans is not None else None
        surveys = self.read_only.surveys if self.read_only is not None else None  # a share: its topics
        replicas = []
        for state in self._dirs:
            try:
                replicas.extend(survey_replica_dirs([state.path], early, surveys))
            except OSError:
                continue
        strays = find_stray_replicas(replicas, self.known_topics)
        self._future_replicas = frozenset(r.topic_partition for r in replicas if r.kind == "future")
        for state in self._dirs:
            state.unmanaged = unmanaged_partitions(state.path, replicas, strays)
        topic_ids: dict[Path, dict[str, str | None]] = {}
        for replica in replicas:
            if replica.kind == "":
                topic_ids.setdefault(replica.log_dir, {})[replica.name] = replica.topic_id
        return strays, topic_ids

    def _adopt(self, state: _LogDirState, loaded: LoadedLogDir) -> None:
        state.had_clean_shutdown = loaded.had_clean_shutdown
        state.kept_high_watermarks = loaded.kept_high_watermarks
        state.broker_epoch = loaded.broker_epoch
        logger.info(
            "Loaded %d logs from %s (clean shutdown: %s, segments recovered: %d, bytes truncated: %d, "
            "partitions that failed to load: %d)",
            len(loaded.logs),
            state.path,
            loaded.had_clean_shutdown,
            loaded.recovered_segments,
            loaded.truncated_bytes,
            len(loaded.failed),
        )
        for log in loaded.logs.values():
            log.on_io_error = self._on_log_io_error
        with self._lock:
            self._logs.update(loaded.logs)
            self._failed.update((f.topic_partition, f) for f in loaded.failed)
            now = self.clock.now_ms()
            self._delete_queue.extend((path, now) for path in loaded.pending_deletion)
            if not loaded.had_clean_shutdown and self.read_only is None:
                self._epochs_to_cut.extend(loaded.logs.values())

    def _cut_recovered_leader_epochs(self) -> None:
        """Kafka's ``truncateFromEndAsyncFlush`` after an unclean stop, off the start-up's path: each
        recovered log's epoch checkpoint (which the load deferred) read and cut to the log's offsets, and
        the cut files written in one batch. The shutdown does it if this task has not."""
        with self._lock:
            logs, self._epochs_to_cut = self._epochs_to_cut, []
        for log in logs:
            _ = log.leader_epochs  # the deferred read cuts the cache in memory
        self._flush_pending_leader_epochs(logs)

    def shutdown(self) -> None:
        """Kafka ``LogManager.shutdown``: close every log, write checkpoints and the clean-shutdown marker."""
        if self.read_only is not None:
            for log in [*self.logs.values(), *self.offline_logs.values()]:
                log.abandon()  # releases its files, writes nothing
            return
        self._cut_recovered_leader_epochs()
        self._flush_pending_leader_epochs()
        for state in self.online_dirs():
            logs = self.logs_in(state.path)
            try:
                with self._checkpoint_lock:
                    logs_by_tp = {log.topic_partition: log for log in logs}
                    failed = self.failed_in(state.path)
                    close_log_dir(
                        LoadedLogDir(
                            state.path,
                            logs_by_tp,
                            state.had_clean_shutdown,
                            failed=failed,
                            kept_high_watermarks=state.kept_high_watermarks,
                            broker_epoch=state.broker_epoch,
                        ),
                        threads=self.settings.recovery_threads_per_dir,
                        unmanaged=state.unmanaged,
                    )
            except OSError as exc:
                self._mark_offline(state, exc)
        for log in self.offline_logs.values():
            log.abandon()
        self.release_locks()
        logger.info("Log manager shut down cleanly")

    def _flush_pending_leader_epochs(self, logs: Iterable[PartitionLog] | None = None) -> None:
        """Write the epoch checkpoints cut in memory (of ``logs``, default every log) in one batch
        (``flush_leader_epochs_in_batch``: two syncs in all, not two a log). Retention and a log's first
        read of its checkpoint after a load cut them so: one at a time, 10,000 logs cost 5 s of a stop."""
        began = time.monotonic()
        written = flush_leader_epochs_in_batch(self.logs.values() if logs is None else logs)
        if written:
            logger.info(
                "Leader-epoch checkpoints cut in memory written for %d logs in %.2f s",
                written,
                time.monotonic() - began,
            )

    def begin_stop(self) -> None:
        """A retention pass in flight ends after the log it is on (the rest waits for the next start), so
        a stop does not wait for a pass over every partition."""
        self._stopping.set()

    def release_locks(self) -> None:
        for state in self._dirs:
            if state.lock is not None:
                state.lock.release()
                state.lock = None

    def _mark_offline(self, state: _LogDirState, exc: BaseException) -> None:
        """Kafka's log-dir failure handling: every log of the dir refuses reads and writes at once (503)
        and stays listed, marked offline, until a restart. Takes no log's lock (a failing log holds its own
        while it calls here)."""
        with self._lock:
            if state.offline_reason is not None:
                return
            state.offline_reason = str(exc)
            for tp in [tp for tp, log in self._logs.items() if log.log_dir == state.path]:
                log = self._logs.pop(tp)
                log.take_offline(state.offline_reason)
                self._offline_logs[tp] = log
        logger.error(
            "Taking log dir %s offline after an I/O error: %s", state.path, exc
        )  # one line: the cause
        logger.debug("The I/O error that took %s offline", state.path, exc_info=exc)

    def _on_log_io_error(self, log: PartitionLog, exc: OSError) -> None:
        self._mark_offline(self._state_of(log.log_dir), exc)

    # -- what is live ----------------------------------------------------------------------------

    def online_dirs(self) -> list[_LogDirState]:
        return [s for s in self._dirs if s.offline_reason is None]

    @property
    def log_dirs(self) -> list[Path]:
        return [s.path for s in self._dirs]

    @property
    def offline_dirs(self) -> dict[Path, str]:
        return {s.path: s.offline_reason for s in self._dirs if s.offline_reason is not None}

    @property
    def logs(self) -> dict[TopicPartition, PartitionLog]:
        with self._lock:
            return dict(self._logs)

    def logs_in(self, log_dir: Path) -> list[PartitionLog]:
        return [log for log in self.logs.values() if log.log_dir == log_dir]

    @property
    def offline_logs(self) -> dict[TopicPartition, PartitionLog]:
        """The logs of offline dirs (a copy): listed, marked offline; every read and write refused."""
        with self._lock:
            return dict(self._offline_logs)

    def get_log(self, tp: TopicPartition) -> PartitionLog:
        """The live log of ``tp``; ``LogDirOfflineError`` (503) if its dir is offline."""
        with self._lock:
            log = self._logs.get(tp)
            offline = self._offline_logs.get(tp)
        if offline is not None:
            offline.check_usable()
        if log is None:
            if tp in self.failed_partitions:
                raise NotFoundError(f"partition {tp} failed to load at start-up (see GET /v1/logs/failed)")
            if any(s.topic_partition == tp for s in self.stray_replicas):
                raise NotFoundError(f"partition {tp} is held as a stray replica (see GET /v1/logs/stray)")
            raise NotFoundError(f"partition {tp} does not exist")
        return log

    @property
    def stray_replicas(self) -> list[StrayReplica]:
        """The stray replicas found at start-up (``service.core.stray_replicas``): listed, never touched."""
        with self._lock:
            return list(self._strays)

    def unmanaged_in(self, log_dir: Path) -> frozenset[TopicPartition]:
        """The partitions of ``log_dir``'s logs that logcleaner does not manage (-future and stray replicas),
        whose checkpoint entries every checkpoint writer carries over."""
        return next((s.unmanaged for s in self._dirs if s.path == log_dir), frozenset())

    @property
    def failed_partitions(self) -> dict[TopicPartition, FailedPartition]:
        """Partitions whose dir failed to load at start-up (not an I/O error): left out, records untouched."""
        with self._lock:
            return dict(self._failed)

    def failed_in(self, log_dir: Path) -> list[FailedPartition]:
        return [f for f in self.failed_partitions.values() if f.path.parent == log_dir]

    def _refuse_failed_topic(self, topic: str) -> None:
        """A topic with a partition that failed to load still owns its dirs: creating it again would
        collide with them."""
        failed = sorted(tp.partition for tp in self.failed_partitions if tp.topic == topic)
        if failed:
            raise ConflictError(
                f"topic {topic!r} has partitions that failed to load at start-up ({failed}); "
                "repair or remove their dirs and restart first"
            )

    def _refuse_stray_names(self, partitions: list[TopicPartition]) -> None:
        """A stray replica under a live name (``t-0``, not renamed ``-stray``) would collide with a new
        partition of that name, or stand beside it as a second copy."""
        wanted = set(partitions)
        names = {partition_dir_name(tp.topic, tp.partition) for tp in partitions}
        held = sorted(
            str(s.path) for s in self.stray_replicas if s.topic_partition in wanted and s.path.name in names
        )
        if held:
            raise ConflictError(
                f"stray replicas hold the names of the partitions to create ({', '.join(held)}); the broker "
                "renames them -stray at its next start, or remove them, then restart"
            )

    def topics(self) -> dict[str, list[int]]:
        """Every topic's partitions, those on offline dirs included."""
        with self._lock:
            tps = sorted([*self._logs, *self._offline_logs])
        out: dict[str, list[int]] = {}
        for tp in tps:
            out.setdefault(tp.topic, []).append(tp.partition)
        return out

    def apply_topic_config(self, topic: str) -> None:
        """A changed topic config takes effect on the next task run, without a restart; each changed key is
        one line on the audit trail (REST, ``topic-config``, a metadata log re-read alike)."""
        self._apply_configs(lambda tp: tp.topic == topic)

    def apply_topic_configs(self) -> None:
        """Every topic's config as it resolves now takes effect: one pass over the logs, each topic's config
        resolved once (a topic at a time would pass over every log once per topic: at 100,000 partitions
        of 1,000 topics, 10^8 steps after each change the daemon picks up)."""
        self._apply_configs(lambda tp: True)

    def _apply_configs(self, selects: Callable[[TopicPartition], bool]) -> None:
        configs: dict[str, LogConfig] = {}
        for tp, log in self.logs.items():
            if not selects(tp):
                continue
            config = configs.get(tp.topic)
            if config is None:
                config = configs[tp.topic] = self.config_for(tp.topic)
                _audit_config_change(tp.topic, log.config, config)  # once a topic
            if self.cleaning is not None and log.config.is_compacted and not config.is_compacted:
                self.cleaning.abort(tp)  # Kafka aborts cleaning when a topic stops being compacted
            log.config = config

    # -- topics ----------------------------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int) -> list[PartitionLog]:
        if not is_valid_topic_name(topic):
            raise InvalidInputError(
                f"topic name {topic!r} is invalid: use 1-249 of [a-zA-Z0-9._-], and not '.' or '..'"
            )
        if topic == METADATA_TOPIC:  # the broker's Raft layer owns it: its dir is never ours to create
            raise InvalidInputError(METADATA_TOPIC_CREATION_PROHIBITED)
        if partitions < 1:
            raise InvalidInputError(f"partitions must be at least 1, got {partitions}")
        with self._topic_admin_lock, self._lock:
            if topic in self.topics():
                raise ConflictError(f"topic {topic!r} already exists")
            self._refuse_failed_topic(topic)
            new = [TopicPartition(topic, p) for p in range(partitions)]
            self._refuse_stray_names(new)
            return self._create_partitions(new)

    def create_partitions(self, topic: str, total: int) -> list[PartitionLog]:
        """Kafka's CreatePartitions: grow ``topic`` to ``total`` partitions (never shrink)."""
        with self._topic_admin_lock, self._lock:
            existing = self.topics().get(topic)
            self._refuse_failed_topic(topic)
            if existing is None:
                raise NotFoundError(f"topic {topic!r} does not exist")
            if total <= len(existing):
                raise InvalidInputError(
                    f"topic {topic!r} has {len(existing)} partitions; the new count {total} must be larger"
                )
            new = [TopicPartition(topic, p) for p in range(len(existing), total)]
            self._refuse_stray_names(new)
            return self._create_partitions(new)

    def _create_partitions(self, partitions: list[TopicPartition]) -> list[PartitionLog]:
        """Each new partition goes to the online dir with the fewest partitions (Kafka's choice).

        The partitions are created in parallel: each costs two fsyncs (``partition.metadata`` and its
        dir), which the file system batches when they come together (300 partitions: 4.6 s one by one,
        0.3 s sixteen at a time). Every partition made on disk is registered, also when another failed;
        the first failure is then raised.
        """
        online = self.online_dirs()
        if not online:
            offline = ", ".join(str(s.path) for s in self._dirs)
            raise LogDirOfflineError(f"no log dir is online (offline: {offline})", log_dir=offline)
        counts = {s.path: 0 for s in online}
        for log in self._logs.values():
            if log.log_dir in counts:
                counts[log.log_dir] += 1
        topics = {tp.topic for tp in partitions}
        topic_ids: dict[str, str | None] = {}
        for existing_tp, log in self._logs.items():  # one pass; only these topics' partition.metadata is read
            if existing_tp.topic in topics and not topic_ids.get(existing_tp.topic):
                topic_ids[existing_tp.topic] = log.topic_id
        configs = {tp.topic: self.config_for(tp.topic) for tp in partitions}
        plan = []
        for tp in partitions:
            # partition.metadata first: a partition dir of ours always has its topic's id (a new one
            # for a new topic, the topic's own for an added partition).
            topic_ids[tp.topic] = topic_ids.get(tp.topic) or new_topic_id()
            target = min(counts, key=counts.__getitem__)
            counts[target] += 1
            plan.append((tp, target / partition_dir_name(tp.topic, tp.partition)))

        def create(tp: TopicPartition, directory: Path) -> PartitionLog:
            directory.mkdir()
            create_partition_metadata(directory, topic_ids[tp.topic])
            return load_partition_log(directory, configs[tp.topic], clock=self.clock).log

        workers = min(_CREATE_PARTITION_THREADS, len(plan))
        with ThreadPoolExecutor(workers, thread_name_prefix="logcleaner-create-partition") as pool:
            futures = [pool.submit(create, tp, directory) for tp, directory in plan]
        created: list[PartitionLog] = []
        failure: Exception | None = None
        for (tp, directory), future in zip(plan, futures, strict=True):
            try:
                log = future.result()
            except FileExistsError:
                failure = failure or ConflictError(
                    f"partition dir {directory.name} already exists but is not a live partition"
                )
            except OSError as exc:
                self._mark_offline(self._state_of(directory.parent), exc)
                failure = failure or LogDirOfflineError(
                    f"cannot create {tp}: log dir {directory.parent} went offline ({exc})",
                    log_dir=str(directory.parent),
                )
            else:
                log.on_io_error = self._on_log_io_error
                self._logs[tp] = log
                created.append(log)
                audit_log.info(
                    "Created log for partition %s in %s (topic id %s)", tp, directory, log.topic_id
                )
        if failure is not None:
            raise failure
        return created

    def delete_topic(self, topic: str) -> list[TopicPartition]:
        """Kafka's asynchronous delete: each partition dir is renamed ``-delete`` and removed later.

        One ordered step per partition, under the topic admin lock (a re-create waits for it): stop the
        cleaner, close the log (in-flight appends finish, every later read and write is refused, 404),
        rename the dir ``-delete``, and only then forget the log; the renames are made durable (one fsync of
        each log dir) and the checkpoints rewritten once, before the call returns. An I/O error on the
        way takes the dir offline (503): the partition stays listed, and its dir keeps its name or its
        ``-delete`` name, never half of each. The cleaning is aborted outside ``_lock``, as Kafka does (the
        cleaner's bookkeeping reads the live logs while the round winds down).
        """
        with self._topic_admin_lock:
            with self._lock:
                doomed = {tp: log for tp, log in sorted(self._logs.items()) if tp.topic == topic}
                offline = sorted(tp for tp in self._offline_logs if tp.topic == topic)
            if offline:
                self._offline_logs[offline[0]].check_usable()
            if not doomed:
                raise NotFoundError(f"topic {topic!r} does not exist")
            for tp, log in doomed.items():
                self._delete_partition(tp, log)
            for tp, log in {log.log_dir: (tp, log) for tp, log in doomed.items()}.values():
                self._finish_deletions(log.log_dir, tp)
            return list(doomed)

    def _delete_partition(self, tp: TopicPartition, log: PartitionLog) -> None:
        """Paused for the cleaner until it is forgotten: a worker must not start a round on it between
        the abort and the moment it leaves the live logs (Kafka removes it from them first)."""
        if self.cleaning is not None:
            self.cleaning.abort_and_pause(tp)
        try:
            self._close_and_rename(tp, log)
        finally:
            if self.cleaning is not None:
                self.cleaning.resume(tp)

    def _close_and_rename(self, tp: TopicPartition, log: PartitionLog) -> None:
        log_dir = log.log_dir
        # Kafka's logDeleteDirName: shorten the topic, never "-<partition>", so the name still parses.
        suffix = f"-{tp.partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        name = tp.topic[: _MAX_DIR_NAME - len(suffix)] + suffix
        renamed = log.directory.with_name(name)
        size_bytes, segment_count = log.size_bytes, len(log.segments)
        try:
            log.close(deleted=True)
            log.directory.rename(renamed)  # made durable once per log dir: _finish_deletions
        except OSError as exc:
            self._mark_offline(self._state_of(log_dir), exc)
            log.check_usable()  # raises LogDirOfflineError
            raise
        with self._checkpoint_lock:  # a partition deleted here leaves its high watermark behind too
            self._state_of(log_dir).kept_high_watermarks.pop(tp, None)
        with self._lock:  # the dir may have gone offline meanwhile (another log's I/O error)
            self._logs.pop(tp, None)
            self._offline_logs.pop(tp, None)
            self._delete_queue.append((renamed, self.clock.now_ms()))
        audit_log.info(
            "Log for partition %s is renamed to %s and is scheduled for deletion (%d bytes in %s, offsets "
            "[%d, %d))",
            tp,
            renamed,
            size_bytes,
            counted(segment_count, "segment"),
            log.log_start_offset,
            log.log_end_offset,
        )

    def _finish_deletions(self, log_dir: Path, deleted: TopicPartition) -> None:
        """Make a topic deletion's renames durable, then drop its partitions from the checkpoints.

        Once per log dir, not per partition: a 1,000-partition topic would otherwise pay 1,000 dir
        fsyncs and rewrite each checkpoint 1,000 times (an entry of a deleted partition is harmless
        meanwhile: Kafka's load ignores entries without a log). Removing one ``deleted`` partition from
        the cleaner's checkpoint drops every partition no longer live with it.
        """
        try:
            fsync_dir(log_dir)
            if self.cleaning is not None:
                self.cleaning.update_checkpoint(log_dir, deleted, None)
            with self._checkpoint_lock:
                state = self._state_of(log_dir)
                write_offset_checkpoints(
                    log_dir,
                    self.logs_in(log_dir),
                    self.failed_in(log_dir),
                    state.kept_high_watermarks,
                    state.unmanaged,
                )
        except OSError as exc:
            self._mark_offline(self._state_of(log_dir), exc)

    def delete_logs(self) -> int:
        """The ``kafka-delete-logs`` task: remove partition dirs whose delay has passed.

        Returns the milliseconds until it should run again (the head's remaining time, or the delay).
        """
        delay = self.settings.log_segment_delete_delay_ms
        now = self.clock.now_ms()
        with self._lock:
            due = [(p, t) for p, t in self._delete_queue if t + delay <= now]
            self._delete_queue = [(p, t) for p, t in self._delete_queue if t + delay > now]
            waiting = min((t + delay - now for _, t in self._delete_queue), default=max(delay, 1))
        for path, _ in due:
            shutil.rmtree(path, ignore_errors=True)
            audit_log.info("Deleted log for partition %s in %s", _deleted_partition_name(path), path)
        return max(waiting, 1)

    @property
    def pending_partition_deletions(self) -> list[Path]:
        with self._lock:
            return [p for p, _ in self._delete_queue]

    # -- retention -------------------------------------------------------------------------------

    def retention_logs(self, *, compacted: bool) -> list[PartitionLog]:
        """Logs the retention task handles (no ``compact`` in the policy), or the cleaner's (compacted)."""
        return [log for log in self.logs.values() if log.config.is_compacted == compacted]

    def cleanup_logs(self) -> list[DeletedSegment]:
        """The ``kafka-log-retention`` task: retention for every non-compacted log (Kafka ``cleanupLogs``).

        With the cleaner on, those logs are paused for the pass (so a policy change cannot race a
        cleaning); logs in another cleaning state are skipped this round, as Kafka does.
        """
        logs = self.retention_logs(compacted=False)
        if self.cleaning is None or not self.settings.cleaner_enabled:
            return self._retention_over(logs, flush_epochs=True)
        paused = self.cleaning.pause_for_retention(logs)
        try:
            return self._retention_over(paused, flush_epochs=True)
        finally:
            for log in paused:
                self.cleaning.resume(log.topic_partition)

    def cleanup_compacted_logs(self) -> list[DeletedSegment]:
        """What Kafka's cleaner threads do after each cleaning attempt: retention for compacted logs."""
        if not self.settings.cleaner_enabled:
            return []
        return self._retention_over(self.retention_logs(compacted=True), flush_epochs=True)

    def cleanup_compacted_log(self, log: PartitionLog) -> list[DeletedSegment]:
        """A cleaner thread's retention of one compacted log it holds (its dir goes offline on I/O error)."""
        return self._retention_over([log])

    def _retention_over(
        self, logs: list[PartitionLog], *, flush_epochs: bool = False
    ) -> list[DeletedSegment]:
        """Retention log by log; an I/O error takes that log's dir offline, corrupt data skips that log
        this round (logged), and the others go on. ``flush_epochs`` (a pass over many logs): the
        leader-epoch checkpoints the pass cut are written after it in one batch, as Kafka flushes them
        asynchronously right after the cut, instead of one at a time by each delayed ``delete-file``."""
        deleted: list[DeletedSegment] = []
        cut: list[PartitionLog] = []
        for done, log in enumerate(logs):
            if self._stopping.is_set():
                logger.info("Retention pass ended early, %d of %d logs done: stopping", done, len(logs))
                break
            try:
                found = self.delete_old_segments(log)
            except OSError as exc:
                self._mark_offline(self._state_of(log.log_dir), exc)
            except LogClosedError:
                continue  # deleted meanwhile
            except CorruptDataError:
                logger.exception("Retention of %s skipped: corrupt data", log.topic_partition)
            else:
                if found:
                    deleted.extend(found)
                    cut.append(log)
        if flush_epochs and cut:
            self._flush_pending_leader_epochs(cut)
        return deleted

    @property
    def retention_deletions(self) -> Counter[str]:
        """Segments deleted by retention since start-up, by reason (a copy): read by the metrics."""
        with self._deletions_lock:
            return Counter(self._retention_deletions)

    def _state_of(self, log_dir: Path) -> _LogDirState:
        return next(s for s in self._dirs if s.path == log_dir)

    def delete_old_segments(self, log: PartitionLog, *, dry_run: bool = False) -> list[DeletedSegment]:
        """Kafka's ``deleteOldSegments`` for one log; files go after the topic's ``file.delete.delay.ms``."""
        with log.lock:
            if self.on_retention_log is not None:
                self.on_retention_log(log)
            segments = log.segments
            plan = plan_retention(
                segments,
                log.config,
                now_ms=self.clock.now_ms(),
                log_start_offset=log.log_start_offset,
                log_end_offset=log.log_end_offset,
                high_watermark=log.high_watermark,
                log_size_bytes=log.size_bytes,  # kept by the log: no sum over its segments
            )
            if plan.total == 0:
                return []
            tp = log.topic_partition
            deleted = [
                DeletedSegment(tp.topic, tp.partition, s.base_offset, s.size_bytes, reason)
                for s, reason in zip(segments, plan.reasons(), strict=False)
            ]
            if dry_run:
                return deleted
            lines = _retention_lines(log, segments, plan.reasons())  # before the files are renamed
            doomed = log.delete_oldest_segments(plan.total)
        with self._deletions_lock:
            self._retention_deletions.update(str(d.reason) for d in deleted)
        for line in lines:
            audit_log.info("%s", line)
        self.scheduler.schedule_once("delete-file", log.config.file_delete_delay_ms, _deleter(log, doomed))
        return deleted

    def remove_expired_producers(self, expiration_ms: int) -> int:
        """Kafka's producer-expiry check: every log forgets producers idle for ``expiration_ms``."""
        expired = 0
        for log in self.logs.values():
            producer_ids = log.remove_expired_producers(expiration_ms)
            if producer_ids:
                expired += len(producer_ids)
                audit_log.info(
                    "%s Expired %s idle for %d ms or more (producer.id.expiration.ms): %s",
                    log_ident(log.topic_partition, log.log_dir),
                    counted(len(producer_ids), "producer id"),
                    expiration_ms,
                    ", ".join(map(str, sorted(producer_ids))),
                )
        return expired

    # -- flush and checkpoints -------------------------------------------------------------------

    def flush_dirty_logs(self) -> None:
        """The ``kafka-log-flusher`` task: flush every log whose ``flush.ms`` has passed."""
        now = self.clock.now_ms()
        for log in self.logs.values():
            if now - log.last_flush_ms >= log.config.flush_ms:
                try:
                    log.flush()
                except LogClosedError:
                    continue  # deleted meanwhile
                except OSError as exc:  # the log took itself offline; make sure its dir follows
                    self._mark_offline(self._state_of(log.log_dir), exc)

    def checkpoint_recovery_points(self) -> None:
        """The ``kafka-recovery-point-checkpoint`` task."""
        for state in self.online_dirs():
            try:
                with self._checkpoint_lock:
                    write_recovery_point_checkpoint(state.path, self.logs_in(state.path), state.unmanaged)
            except OSError as exc:
                self._mark_offline(state, exc)

    def checkpoint_log_start_offsets(self) -> None:
        """The ``kafka-log-start-offset-checkpoint`` task (partitions that failed to load keep theirs)."""
        for state in self.online_dirs():
            try:
                with self._checkpoint_lock:
                    logs = self.logs_in(state.path)
                    failed = self.failed_in(state.path)
                    write_log_start_offset_checkpoint(state.path, logs, failed, state.unmanaged)
            except OSError as exc:
                self._mark_offline(state, exc)

    def checkpoint_high_watermarks(self) -> None:
        """The ``highwatermark-checkpoint`` task (Kafka ``ReplicaManager.checkpointHighWatermarks``): each
        online dir's ``replication-offset-checkpoint``, entries of partitions not managed here kept."""
        for state in self.online_dirs():
            try:
                with self._checkpoint_lock:
                    logs = self.logs_in(state.path)
                    write_high_watermark_checkpoint(state.path, logs, state.kept_high_watermarks)
            except OSError as exc:
                self._mark_offline(state, exc)


def _deleted_partition_name(path: Path) -> str:
    """``orders-0`` of ``orders-0.<id>-delete`` (Kafka's ``logDeleteDirName``; the topic may be shortened)."""
    return path.name.rsplit(".", 1)[0] if path.name.endswith(DELETE_DIR_SUFFIX) else path.name


def _retention_lines(
    log: PartitionLog, segments: Sequence[LogSegment], reasons: list[RetentionReason]
) -> list[str]:
    """``UnifiedLog``'s lines for the segments retention deletes, one each, with the rule and its value."""
    ident = log_ident(log.topic_partition, log.log_dir)
    config = log.config
    size_after = log.size_bytes
    lines = []
    for segment, reason in zip(segments, reasons, strict=False):
        _largest, source = segment.largest_timestamp()
        described = segment_description(
            segment.base_offset, segment.size_bytes, segment.last_modified_ms(), segment.max_timestamp_so_far
        )
        size_after -= segment.size_bytes
        if reason is RetentionReason.TIME:
            basis = (
                "the last modified time of the segment"
                if source == TIMESTAMP_SOURCE_MTIME
                else "the largest record timestamp in the segment"
            )
            why = f"log retention time {config.retention_ms}ms breach based on {basis}"
        elif reason is RetentionReason.SIZE:
            why = (
                f"log retention size {config.retention_bytes} breach. Log size after deletion will be "
                f"{size_after}."
            )
        else:
            why = f"log start offset {log.log_start_offset} breach"
        lines.append(f"{ident} Deleting segment {described} due to {why}")
    return lines


def _deleter(log: PartitionLog, segments: list[LogSegment]) -> Callable[[], None]:
    """Retention's delayed work for one log: its deleted segments' files go, and the leader-epoch
    checkpoint that retention's truncation left unwritten is written (if the pass's batch did not)."""

    def delete() -> None:
        for segment in segments:
            segment.delete_files()
            delete_marked_snapshot(segment.log_path.parent, segment.base_offset)
        log.flush_leader_epochs()

    return delete


def _audit_config_change(topic: str, old: LogConfig, new: LogConfig) -> None:
    """``Topic config changed: orders retention.ms 604800000 [default] -> 86400000 [override]``, one line a
    key whose value or source changed; a topic whose configs become known or unknown says so too."""
    old_sources, new_sources = dict(old.config_sources), dict(new.config_sources)
    for name in sorted(new_sources.keys() | old_sources.keys()):
        attribute = name.replace(".", "_")
        before, after = getattr(old, attribute, None), getattr(new, attribute, None)
        if before == after and old_sources.get(name) == new_sources.get(name):
            continue
        audit_log.info(
            "Topic config changed: %s %s %s [%s] -> %s [%s]",
            topic,
            name,
            _config_text(before),
            old_sources.get(name, "?"),
            _config_text(after),
            new_sources.get(name, "?"),
        )


def _config_text(value: object) -> str:
    """A config value as Kafka writes it (``compact,delete``, ``true``)."""
    if isinstance(value, frozenset):
        return ",".join(sorted(value))
    if isinstance(value, bool):
        return str(value).lower()
    return str(getattr(value, "label", value))

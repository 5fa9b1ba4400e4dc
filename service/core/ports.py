"""The seams between the core and the outer packages (``typing.Protocol``s).

The API reaches the cleaner and the scheduler only through these, injected by the composition root, and
the logs through ``LogQueries`` (``service.core.queries`` implements it): what its routes ask, grouped by
route, with the locks taken inside the core.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from service.base.clock import Clock
from service.config.topic_config import ConfigEntry
from service.config.topic_store import SetAsideFile
from service.core.stray_replicas import StrayReplica
from service.storage.load_progress import LoadProgress
from service.storage.log import AppendInfo, PartitionLog
from service.storage.log_config import LogConfig
from service.storage.log_dir import FailedPartition
from service.storage.records import RecordBatch
from service.storage.topic_partition import TopicPartition

__all__ = [
    "CleanerFigures",
    "CleanerSetting",
    "CleanerView",
    "CleaningControl",
    "LogDirsStatus",
    "LogFigures",
    "LogQueries",
    "LogTasks",
    "PartitionReads",
    "PartitionRecords",
    "PartitionRow",
    "PartitionScrape",
    "PartitionScrapes",
    "SummaryView",
    "TaskScheduler",
    "TopicAdmin",
    "TopicConfigs",
]


class TaskScheduler(Protocol):
    """Runs ``task`` once, ``delay_ms`` from now (Kafka's ``scheduler.scheduleOnce``)."""

    def schedule_once(self, name: str, delay_ms: int, task: Callable[[], None]) -> None: ...


class CleaningControl(Protocol):
    """What the LogManager asks of the cleaner's bookkeeping (Kafka: LogManager → LogCleanerManager)."""

    def pause_for_retention(self, logs: Iterable[PartitionLog]) -> list[PartitionLog]:
        """Pause the logs not in any cleaning state, for a retention pass; returns those paused."""
        ...

    def resume(self, tp: TopicPartition) -> None: ...

    def abort(self, tp: TopicPartition) -> None:
        """Stop a running cleaning of ``tp`` (partition deletion, a policy change away from compact)."""
        ...

    def abort_and_pause(self, tp: TopicPartition, timeout_s: float = 60.0, *, reason: str = "") -> None:
        """Stop a running cleaning of ``tp`` and keep it from starting again until ``resume``; ``reason``
        says why to whoever lists the paused partitions."""
        ...

    def update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int | None) -> None:
        """Set, or with None remove, ``tp``'s entry in ``cleaner-offset-checkpoint``."""
        ...


@dataclass(frozen=True, slots=True)
class CleanerFigures:
    """The log cleaner's figures at one instant, as Kafka's LogCleaner and LogCleanerManager gauges report
    them (``uncleanable`` per log dir: partition count and bytes), plus our running byte totals."""

    threads: int
    dead_thread_count: int
    max_buffer_utilization_percent: float
    cleaner_recopy_percent: int
    max_clean_time_secs: float
    max_compaction_delay_secs: int
    max_dirty_percent: int
    time_since_last_run_ms: int
    uncleanable: dict[Path, tuple[int, int]] = field(default_factory=dict)
    bytes_read_total: int = 0
    bytes_written_total: int = 0
    rounds_by_engine: dict[str, int] = field(default_factory=dict)
    bytes_read_by_engine: dict[str, int] = field(default_factory=dict)
    uncleanable_past_retry: dict[Path, int] = field(default_factory=dict)
    """Per log dir: uncleanable partitions whose retry is due but not yet taken."""
    thread_restarts: int = 0
    rounds_spilled_total: int = 0  # rounds whose key map spilled beyond its thread's share


class CleanerView(Protocol):
    """What the API and the metrics see of the log cleaner (injected by the composition root)."""

    def figures(self) -> CleanerFigures: ...

    def status(self) -> dict[str, object]:
        """The ``GET /v1/cleaner`` document: threads, in-progress and uncleanable partitions, last runs."""
        ...

    def clean_partition(self, tp: TopicPartition) -> dict[str, object]:
        """Clean ``tp`` now, on the caller's thread; one entry of the ``clean`` document.

        Raises ``NotFoundError`` for an unknown partition, ``ConflictError`` if it is not compacted or is
        being cleaned already.
        """
        ...

    def retry_uncleanable(self, tp: TopicPartition) -> dict[str, object]:
        """Try uncleanable ``tp`` again at the cleaner's next selection; its ``uncleanable`` entry.

        Raises ``NotFoundError`` if ``tp`` is not uncleanable.
        """
        ...


class SummaryView(Protocol):
    """The whole-broker summary the daemon keeps ready (``service.core.summary_cache.BrokerSummary``)."""

    def document(self) -> dict[str, object]:
        """The latest summary document (built now only before the first scheduled refresh)."""
        ...

    def latest(self) -> dict[str, object] | None:
        """The latest document, or None before the first refresh (what a scrape reads)."""
        ...


class PartitionRecords(Protocol):
    """One partition's log as produce, fetch and DeleteRecords use it (``PartitionLog`` is one): each
    call takes the log's own lock, and the offsets are read as the log last published them."""

    @property
    def topic_partition(self) -> TopicPartition: ...
    @property
    def config(self) -> LogConfig: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...

    def append_batches(self, data: bytes) -> AppendInfo:
        """Validate every batch of ``data``, then append them all (``InvalidInputError`` if any is bad)."""
        ...

    def read_batches(self, offset: int) -> Iterator[RecordBatch]:
        """Batches from the one holding ``offset`` (or the next one) to the end."""
        ...

    def delete_records(self, before_offset: int) -> bool:
        """Kafka's DeleteRecords: advance the log start offset (refused without ``cleanup.policy=delete``)."""
        ...


class PartitionReads(Protocol):
    """What the topic, partition and records routes read of the logs."""

    def topics(self) -> dict[str, list[int]]:
        """Every topic's partitions, those on offline dirs included."""
        ...

    def offline_partitions(self) -> list[TopicPartition]:
        """The partitions on offline log dirs, sorted."""
        ...

    def topic_logs(self, topic: str) -> dict[str, object]:
        """``topic_id`` (the first partition's that has one) and ``partitions``: each one's figures held
        in memory (offsets, size, segment count, offline), an offline log's as last known."""
        ...

    def partition_document(self, tp: TopicPartition) -> dict[str, object]:
        """``GET /v1/topics/{t}/partitions/{p}``: the log's figures and its segments', O(segments) (each
        segment keeps its record count as it grows)."""
        ...

    def partition(self, tp: TopicPartition) -> PartitionRecords:
        """The live log of ``tp``; ``NotFoundError`` says whether the topic or the partition is missing, or
        why it is held (load failure, stray replica); ``LogDirOfflineError`` if its dir is offline."""
        ...

    def now_ms(self) -> int:
        """The node's clock (record timestamps of a produce without one)."""
        ...


class TopicAdmin(Protocol):
    """Kafka's CreateTopics, CreatePartitions and DeleteTopics on the logs (the API serialises them)."""

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create ``topic``'s logs, with the overrides stored for it already."""
        ...

    def create_partitions(self, topic: str, total: int) -> None:
        """Grow ``topic`` to ``total`` partitions (never shrink)."""
        ...

    def delete_topic(self, topic: str) -> list[TopicPartition]:
        """Rename each partition dir ``-delete`` now (removed later) and drop the topic's overrides;
        returns the partitions deleted."""
        ...


class TopicConfigs(Protocol):
    """logcleaner's topic overrides (durable), and each topic's effective configs with their sources."""

    def overrides(self, topic: str) -> dict[str, str]: ...

    def update_overrides(self, topic: str, changes: Mapping[str, str], deletes: Iterable[str] = ()) -> None:
        """Set ``changes`` and remove ``deletes``, durably; ``refresh_topic_configs`` applies them."""
        ...

    def config_entries(self, topic: str) -> dict[str, ConfigEntry]:
        """Every topic config's effective value and source (override, metadata log, broker, default)."""
        ...

    def refresh_topic_configs(self) -> None:
        """Apply changed topic overrides (and metadata-log configs) to the live logs."""
        ...

    @property
    def set_aside_config_files(self) -> list[SetAsideFile]:
        """Corrupt copies of the overrides' store found since start-up, renamed aside."""
        ...


class LogTasks(Protocol):
    """The periodic tasks' work on demand, and the files they keep."""

    def run_retention(self, *, dry_run: bool) -> dict[str, object]:
        """The ``retention`` document of one pass over the non-compacted logs, configs refreshed first."""
        ...

    def explain(self, *, topic: str | None, partition: int | None) -> dict[str, object]:
        """The ``explain`` document: what retention would do to each segment and why, the cleaner's view."""
        ...

    def checkpoints(self, names: Sequence[str]) -> list[dict[str, object]]:
        """Each checkpoint file ``names`` of every log dir, parsed (missing: empty; unreadable: its error)."""
        ...


class LogDirsStatus(Protocol):
    """The log dirs' state: loaded, offline, and what start-up left out."""

    @property
    def is_loaded(self) -> bool: ...
    @property
    def log_dirs(self) -> list[Path]: ...
    @property
    def offline_dirs(self) -> dict[Path, str]:
        """Each offline log dir and why it went offline."""
        ...

    @property
    def failed_partitions(self) -> list[FailedPartition]:
        """Partitions that failed to load at start-up, sorted."""
        ...

    @property
    def stray_replicas(self) -> list[StrayReplica]: ...


class LogQueries(PartitionReads, TopicAdmin, TopicConfigs, LogTasks, LogDirsStatus, Protocol):
    """Everything the REST API asks of the logs (Kafka: what a broker's request handlers ask of its
    ``ReplicaManager``, ``LogManager`` and config repository), without a lock or a core class."""


class CleanerSetting(Protocol):
    @property
    def cleaner_enabled(self) -> bool: ...


class LogFigures(Protocol):
    """What the metrics read of the LogManager at a scrape (``LogManager`` is one): its live logs'
    snapshots, the log dirs' state and the counts it keeps."""

    @property
    def logs(self) -> dict[TopicPartition, PartitionLog]: ...
    @property
    def log_dirs(self) -> list[Path]: ...
    @property
    def offline_dirs(self) -> dict[Path, str]: ...
    @property
    def failed_partitions(self) -> dict[TopicPartition, FailedPartition]: ...
    @property
    def stray_replicas(self) -> list[StrayReplica]: ...
    @property
    def retention_deletions(self) -> Counter[str]: ...
    @property
    def load_progress(self) -> LoadProgress: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def settings(self) -> CleanerSetting: ...

    def topics_with_unknown_configs(self) -> list[str]: ...


PartitionRow = tuple[TopicPartition, int, int, int, int, int]
"""One log at a scrape: its size, segment count, log start and end offsets (Kafka's four ``Log`` gauges),
and the segments time retention holds back for a future timestamp (0: none)."""


@dataclass(frozen=True, slots=True)
class PartitionScrape:
    """The per-partition figures of one scrape: a row per live log, then one per log of a dir gone offline
    (its last figures); each compacted partition's compaction delay in ms (empty without a cleaner); the
    partitions of offline dirs, sorted."""

    rows: list[PartitionRow]
    delays: dict[TopicPartition, int]
    offline: list[TopicPartition]


class PartitionScrapes(Protocol):
    """The per-partition figures the metrics expose, taken one scrape at a time (the caller's lock)."""

    def scrape(self) -> PartitionScrape: ...

"""The seams between the core and the outer packages (``typing.Protocol``s).

The API reaches the cleaner and the scheduler only through these, injected by the composition root.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from service.storage.log import PartitionLog
from service.storage.topic_partition import TopicPartition

__all__ = ["CleanerFigures", "CleanerView", "CleaningControl", "SummaryView", "TaskScheduler"]


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

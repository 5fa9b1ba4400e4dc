"""The seams between the core and the outer packages (``typing.Protocol``s).

The API reaches the cleaner and the scheduler only through these, injected by the composition root.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from service.storage.log import PartitionLog
from service.storage.topic_partition import TopicPartition

__all__ = ["CleaningControl", "TaskScheduler"]


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

    def update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int | None) -> None:
        """Set, or with None remove, ``tp``'s entry in ``cleaner-offset-checkpoint``."""
        ...

"""Where a cleaning round's heavy work runs: in this process, or on Spark (``cleaner/spark/``).

Both engines take the same inputs and must produce byte-identical logs (the in-process ``Cleaner`` is the
oracle the Spark engine is tested against). The cleaner's workers call an engine through this protocol
only, so the daemon, the CLI and the tests pick one by ``log.cleaner.engine``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from cleaner.cleaner import Cleaner, CleaningResult, ScheduleDelete
from service.clock import Clock
from service.storage.log import PartitionLog

__all__ = ["CompactionEngine", "InProcessEngine", "ScheduleDelete"]


class CompactionEngine(Protocol):
    """One cleaning round of one log over [first dirty, upper bound), swapped in with Kafka's protocol.

    ``check_aborted`` raises ``CleaningAbortedError`` once the round must stop (called between units of
    work; nothing half-done is published); ``throttle(n)`` is told of every n bytes read or written;
    ``schedule_delete(delay_ms, fn)`` removes replaced segment files later (``file.delete.delay.ms``).
    """

    name: str

    def clean(
        self,
        log: PartitionLog,
        first_dirty_offset: int,
        upper_bound_offset: int,
        *,
        check_aborted: Callable[[], None],
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int = 0,
    ) -> CleaningResult: ...

    def close(self) -> None:
        """Release what the engine holds (the SparkSession); called once, at shutdown."""
        ...


class InProcessEngine:
    """The pure-Python ``Cleaner``, on the calling thread (``log.cleaner.engine=in-process``)."""

    name = "in-process"

    def __init__(self, clock: Clock, *, dedupe_buffer_bytes: int = 134_217_728, load_factor: float = 0.9):
        self.clock = clock
        self.dedupe_buffer_bytes = dedupe_buffer_bytes
        self.load_factor = load_factor

    def clean(
        self,
        log: PartitionLog,
        first_dirty_offset: int,
        upper_bound_offset: int,
        *,
        check_aborted: Callable[[], None],
        throttle: Callable[[int], None],
        schedule_delete: ScheduleDelete,
        thread_id: int = 0,
    ) -> CleaningResult:
        cleaner = Cleaner(
            clock=self.clock,
            schedule_delete=schedule_delete,
            throttle=throttle,
            check_aborted=check_aborted,
            dedupe_buffer_bytes=self.dedupe_buffer_bytes,
            load_factor=self.load_factor,
            thread_id=thread_id,
        )
        return cleaner.clean(log, first_dirty_offset, upper_bound_offset)

    def close(self) -> None:
        return None

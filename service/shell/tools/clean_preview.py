"""Before ``logcleaner clean`` takes the log dirs: whether any partition would be cleaned, and if none
would, why not, each compacted partition with its dirty ratio.

It reads the logs as an inspection does (``read_only_log_manager``: nothing written), with the cleaner's
own choice (``LogToClean.verdict``, as ``CleanerManager.grab_filthiest_compacted_logs`` applies it). When
nothing would be cleaned, ``clean`` stops there and leaves every file as it was: a writable load would
have removed the clean-shutdown marker and rewritten it and both checkpoints on close.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.config.broker_config import BrokerConfig
from service.core.cleanable import cleaner_checkpoints, log_to_clean
from service.shell.tools.log_commands import read_only_log_manager

__all__ = ["NotCleaned", "nothing_to_clean"]


@dataclass(frozen=True, slots=True)
class NotCleaned:
    """A compacted partition the cleaner would not pick now, and its figures."""

    topic: str
    partition: int
    dirty_ratio: float
    min_cleanable_dirty_ratio: float
    cleanable_bytes: int

    def describe(self) -> str:
        if self.cleanable_bytes == 0:
            return f"not cleaned {self.topic}-{self.partition}: nothing dirty below its active segment"
        return (
            f"not cleaned {self.topic}-{self.partition}: dirty ratio {self.dirty_ratio:.3f} is not above "
            f"min.cleanable.dirty.ratio={self.min_cleanable_dirty_ratio}"
        )


def nothing_to_clean(broker: BrokerConfig) -> list[NotCleaned] | None:
    """Every compacted partition with why it would not be cleaned (empty: no compacted partition), or
    None when some partition would be cleaned or a cleaner checkpoint would be reset (the run changes
    files)."""
    with read_only_log_manager(broker) as (manager, _copies):
        checkpoints = cleaner_checkpoints(manager.logs.values())
        now_ms = manager.clock.now_ms()
        kept = []
        for tp, log in sorted(manager.logs.items(), key=lambda item: (item[0].topic, item[0].partition)):
            if not log.config.is_compacted:
                continue
            checkpoint = checkpoints.get(tp)
            candidate = log_to_clean(log, checkpoint, now_ms)
            min_ratio = log.config.min_cleanable_dirty_ratio
            if candidate.verdict(min_ratio)[0] or checkpoint not in (None, candidate.first_dirty_offset):
                return None
            kept.append(
                NotCleaned(
                    tp.topic, tp.partition, candidate.cleanable_ratio, min_ratio, candidate.cleanable_bytes
                )
            )
        return kept

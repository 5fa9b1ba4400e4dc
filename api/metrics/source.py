"""What the metrics read of the running service. The daemon satisfies it; so can a test's own object."""

from __future__ import annotations

from typing import Protocol

from service.log_manager import LogManager
from service.ports import CleanerView

__all__ = ["MetricsSource"]


class MetricsSource(Protocol):
    """Read at every scrape, never at construction: the daemon builds the metrics first (its scheduler
    needs their callback) and its LogManager and cleaner after."""

    @property
    def log_manager(self) -> LogManager: ...

    @property
    def cleaner_view(self) -> CleanerView | None:
        """The log cleaner, or None when there is none (``log.cleaner.enable=false``)."""
        ...

"""What the metrics read of the running node. ``service.shell.node.NodeView`` satisfies it; so can a test's
own object."""

from __future__ import annotations

from typing import Protocol

from service.core.ports import CleanerView, LogFigures, PartitionScrapes, SummaryView

__all__ = ["MetricsSource"]


class MetricsSource(Protocol):
    """Read at every scrape, never at construction: the cleaner is built only once the logs loaded."""

    @property
    def log_manager(self) -> LogFigures:
        """The LogManager's figures (``service.core.log_manager.LogManager`` is one)."""
        ...

    @property
    def partition_figures(self) -> PartitionScrapes:
        """The per-partition figures, one scrape at a time (``service.core.partition_figures``)."""
        ...

    @property
    def cleaner_view(self) -> CleanerView | None:
        """The log cleaner, or None when there is none (``log.cleaner.enable=false``)."""
        ...

    @property
    def explain_summary(self) -> SummaryView:
        """The whole-broker summary the daemon keeps ready (``logcleaner_bytes_held``)."""
        ...

"""The cleaner's errors, under the service's root error."""

from __future__ import annotations

from service.base.errors import ConflictError, LogCleanerError

__all__ = ["CleaningAbortedError", "EngineUnavailableError", "IllegalCleanerStateError"]


class CleaningAbortedError(LogCleanerError):
    """A round stopped because its partition was aborted (deletion, truncation, policy change) or the
    cleaner is shutting down. Not a failure: the partition is not marked uncleanable."""


class IllegalCleanerStateError(ConflictError):
    """A cleaning-state transition that Kafka's LogCleanerManager does not allow (cleaner/pool/manager.py)."""


class EngineUnavailableError(LogCleanerError):
    """The engine could not run the round at all (Spark did not start: no Java, no master): the engine's
    fault, not the partition's. The round runs on the other engine; nothing is marked uncleanable."""

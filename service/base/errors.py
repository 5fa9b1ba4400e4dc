"""The error hierarchy: one root, each error also a matching built-in, context kept as attributes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "ConflictError",
    "CorruptDataError",
    "DuplicatePartitionDirError",
    "InterruptedCommandError",
    "InvalidInputError",
    "LogCleanerError",
    "LogClosedError",
    "LogDirOfflineError",
    "NotFoundError",
    "OffsetOutOfRangeError",
    "RecordTooLargeError",
    "UnsupportedFormatError",
    "WouldWriteError",
    "corrupt_data_in",
]


class LogCleanerError(Exception):
    """Root of every error logcleaner raises on purpose."""


class InterruptedCommandError(LogCleanerError):
    """An offline command stopped by SIGINT or SIGTERM at a safe point; the message says how far it got.

    Exits with the shell's code for the signal: 130 (SIGINT), 143 (SIGTERM)."""

    def __init__(self, message: str, *, signum: int) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


class InvalidInputError(LogCleanerError, ValueError):
    """Input (a record, a config value, a request) broke a rule; the message names the rule."""


class NotFoundError(LogCleanerError, LookupError):
    """A topic, partition, file or offset that does not exist."""


class LogClosedError(NotFoundError):
    """A closed log (its topic deleted, or the service shutting down) refuses every read and write."""


class LogDirOfflineError(LogCleanerError, OSError):
    """A log dir went offline after an I/O error: its logs refuse reads and writes until a restart.

    Also an ``OSError``, so every caller that takes a dir offline on an I/O error treats it alike.
    """

    def __init__(self, message: str, *, log_dir: str) -> None:
        super().__init__(message)
        self.log_dir = log_dir

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_offline, (str(self), self.log_dir))


def _rebuild_offline(message: str, log_dir: str) -> LogDirOfflineError:
    return LogDirOfflineError(message, log_dir=log_dir)


class ConflictError(LogCleanerError):
    """The request conflicts with current state (the topic exists, the dir is locked)."""


class PolicyViolationError(ConflictError):
    """A request the topic's config forbids (Kafka's ``PolicyViolationException``): DeleteRecords on a topic
    whose ``cleanup.policy`` has no ``delete`` (``Partition.deleteRecordsOnLeader``). Fix: add ``delete``
    to the policy (``compact,delete``), or leave the records to compaction."""

    def __init__(self, message: str, *, topic: str, partition: int, policy: str) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.policy = policy


class DuplicatePartitionDirError(InvalidInputError):
    """Two partition dirs hold the same partition (in two log dirs, or ``t-7`` beside ``t-007``): Kafka's
    LogManager refuses to start, and so does every command that loads the logs, having changed nothing.

    Fix: delete one of the two dirs (Kafka recommends the one in the log dir that failed most recently).
    """

    def __init__(self, message: str, *, topic: str, partition: int, paths: tuple[str, str]) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.paths = paths


class WouldWriteError(LogCleanerError):
    """A read-only load reached a step that writes (recovery, a swap to complete, an index to rebuild);
    the caller loads that partition from a copy instead. The message says which step."""


class OffsetOutOfRangeError(InvalidInputError):
    """An offset outside [log start offset, log end offset]."""

    def __init__(self, message: str, *, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(message)
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class RecordTooLargeError(InvalidInputError):
    """A batch larger than max.message.bytes or segment.bytes."""


class CorruptDataError(LogCleanerError, ValueError):
    """Bytes on disk (or handed to a decoder) are not what the format says.

    ``path`` and ``position`` say where; the message always names both when they are known.
    Fix: a log's recovery truncates at the first corrupt batch; a corrupt index is rebuilt.
    """

    def __init__(self, message: str, *, path: str | None = None, position: int | None = None) -> None:
        self.reason = message
        self.path = path
        self.position = position
        super().__init__(self._format())

    def _format(self) -> str:
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.position is not None:
            where.append(f"position {self.position}")
        return f"{', '.join(where)}: {self.reason}" if where else self.reason

    def at(self, *, path: str | None = None, position: int | None = None) -> CorruptDataError:
        """Return a copy located in ``path`` at ``position`` (positions add up: batch + inner)."""
        new_position = self.position
        if position is not None:
            new_position = position + (self.position or 0)
        located = type(self)(self.reason, path=path or self.path, position=new_position)
        located.__cause__ = self.__cause__
        return located

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_corrupt, (type(self), self.reason, self.path, self.position))


@contextmanager
def corrupt_data_in(path: Path) -> Iterator[None]:
    """A ``CorruptDataError`` raised inside, named with the file it was read from when it names none (a
    batch's records are decoded, and decompressed, only after the read that found the batch)."""
    try:
        yield
    except CorruptDataError as exc:
        if exc.path is not None:
            raise
        raise exc.at(path=str(path)) from exc


def _rebuild_corrupt(
    cls: type[CorruptDataError], reason: str, path: str | None, position: int | None
) -> CorruptDataError:
    return cls(reason, path=path, position=position)


class UnsupportedFormatError(CorruptDataError):
    """A valid-looking batch in a format we do not handle (magic 0/1 message sets)."""

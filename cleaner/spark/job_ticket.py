"""A round's ticket: no task of a cancelled or failed Spark job writes a file after the driver cleans up.

A cancelled Spark job ends at once on the JVM side, but its Python workers may keep running (a task's work
is its side effects: ``.cleaned`` segments, key map blobs), so "no task is active" is not "no file will be
written". The driver therefore creates one ticket file per log in the log's dir before the job
(``<round end offset>.job.cleaned``: a ``.cleaned`` name, which the loader deletes after a crash) and keeps
it open. The file holds a token of its job's own (``TicketRef``), so a task of an earlier job of the same
round (one cancelled when another log of its job was aborted) never takes the ticket of the job run again
at the same path. Each task opens it, takes a shared ``flock`` for its whole life, checks that the file
holds its job's token and that the path is still the ticket it holds, and checks the path again between
groups (``TaskTicket.check``). To finish, the driver unlinks the path (a task that looks stops; one that
starts finds nothing and writes nothing), then takes an exclusive lock, which waits until every task
holding the ticket has ended or died; only then does it remove the tasks' files. A task writes only
while it holds the ticket, so every file a task writes exists before the driver removes the tasks' files.
Executors must see the log dirs (they already read and write segments there).
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from service.errors import LogCleanerError

__all__ = ["JobCancelledError", "JobTicket", "TaskTicket", "TicketRef", "ticket_path"]

logger = logging.getLogger(__name__)

_WAIT_S = 120.0  # at most this long for the tasks still holding a ticket (a stuck worker: warn, go on)


class JobCancelledError(LogCleanerError):
    """A task found its round's ticket gone: the job was cancelled or has failed."""


def ticket_path(directory: str, end_offset: int) -> str:
    return os.path.join(directory, f"{end_offset:020d}.job.cleaned")


@dataclass(frozen=True, slots=True)
class TicketRef:
    """What a task is given of its job's ticket: the path, and the token the job's ticket holds."""

    path: str
    token: str


class JobTicket:
    """The driver's side: ``create`` before the job, ``close`` after it (whatever happened)."""

    def __init__(self, ref: TicketRef, fd: int) -> None:
        self.ref = ref
        self.path = ref.path
        self._fd = fd

    @classmethod
    def create(cls, directory: str, end_offset: int) -> JobTicket:
        ref = TicketRef(ticket_path(directory, end_offset), secrets.token_hex(16))
        with open(ref.path, "w", encoding="ascii") as ticket:  # closed: on NFS, other hosts now read it
            ticket.write(ref.token)
        return cls(ref, os.open(ref.path, os.O_RDONLY | os.O_CLOEXEC))

    def close(self) -> None:
        """Withdraw the ticket and wait until no task holds it."""
        if self._fd < 0:
            return
        Path(self.path).unlink(missing_ok=True)
        deadline = time.monotonic() + _WAIT_S
        try:
            while True:
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        logger.warning("%s: a Spark task still holds the round's ticket; going on", self.path)
                        break
                    time.sleep(0.01)
        finally:
            os.close(self._fd)
            self._fd = -1


class TaskTicket:
    """A task's side: ``with TaskTicket(ref):`` around everything the task writes."""

    def __init__(self, ref: TicketRef) -> None:
        self.path = ref.path
        self._token = ref.token.encode("ascii")
        self._fd = -1

    def __enter__(self) -> TaskTicket:
        try:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise JobCancelledError(f"{self.path}: the round's job was cancelled") from None
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        try:
            if os.pread(self._fd, len(self._token) + 1, 0) != self._token:
                raise JobCancelledError(f"{self.path}: the ticket of another job of the round")
            self.check()
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self._release()

    def check(self) -> None:
        """Raise ``JobCancelledError`` if the driver withdrew the ticket."""
        try:
            same = os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            raise JobCancelledError(f"{self.path}: the round's job was cancelled")

    def _release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

"""The files in a log's dir through which a Spark job's driver and tasks coordinate: the round's ticket, the
items' reports, the claims on groups and on items.

A round's ticket: no task of a cancelled or failed Spark job writes a file after the driver cleans up.

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

Reports that Spark tasks leave for the driver as each rewrite item ends, not when the whole job does.

A task's return value reaches the driver only with every other task's, when ``collect`` returns, and a
task of a shared job cleans several logs one after the other (``jobs``). So once an item's files are
durable, its task writes the item's rows to the item's report file in its log's dir
(``<round end offset>.rows.<range>.cleaned``, a ``.cleaned`` name, which the loader deletes after a crash:
written whole under a name of its own, then renamed, while the task holds the round's ticket) and goes
on. Between its abort checks the driver looks for the report files of the items it has not heard from
(``JobReports``), and a job's driver uses them to swap each log in as soon as its last item has ended
(``SparkEngine.clean_many``). The reports only bring that forward: ``collect`` still returns every row, and
whatever no report settled is settled from those rows after the job. Executors already write the log dirs
(``rewrite``), so this works on a real cluster as on ``local[*]``.

A log's groups taken one at a time by its rewrite tasks, the costliest first, so the tasks end together.

A log mapped by key hash is rewritten by several tasks at once. A cut fixed before they start can only
guess what each group costs (what it keeps re-encoded and written costs several times what it drops, and
by how much moves with the machine), and the task with the costlier range then runs alone at the end.
Instead each task takes its next group from the log's claims file when it is free: the group of the
highest estimated cost (``rewrite.rewrite_costs``) that no task has taken. A misestimate then only
changes the order, and the tasks end within about one of the cheapest groups of each other.

The file (``<round end offset>.claims.cleaned`` in the log's dir: a ``.cleaned`` name, which the loader
deletes after a crash) holds one little-endian int32 per group: 0 while free, else the Spark partition
that took it, plus one. A task takes a group under the file's exclusive ``flock``. A retried attempt of a
partition first takes again every group an earlier attempt of its partition took, since the failed
attempt's rows never reached the driver. Tasks create the file; the driver removes it before the job and
after (``partial_maps``' map files follow the same rule, and the round's ticket guarantees no task writes
it after the driver removed it).

A shared job's rewrite items taken one at a time by its tasks, so a job of many logs needs one task a core.

A Spark task costs a launch, a round trip to its Python worker and a wait for its results (10–35 ms on a
2-core VM, between the end of one task and the start of the next). A job of many logs of one range each
therefore runs one task per core (``jobs``), and each task takes the job's items one after the other,
the largest first, whichever no other task has taken: Spark's own balancing, without a task per item.
The job's smallest log is not taken: every task joins it once none is left (``jobs.shared_log``).

An item is taken by creating its claim file (``<round end offset>.taken.cleaned`` in its log's dir, a
``.cleaned`` name, which the loader deletes after a crash) holding the taking partition's number: written
under a name of its own, then hard-linked to the claim's name, which fails if the claim exists, so the
file appears whole and once. The task holds the round's ticket while it takes (above): no claim
is written after the driver removed the log's files. A retried attempt of a partition takes again the
items an earlier attempt of its partition took but did not report (the reports, above); an item whose report
exists is done.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import struct
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from service.base.errors import LogCleanerError
from service.storage.log_files import file_name

__all__ = [
    "JobCancelledError",
    "JobReports",
    "JobTicket",
    "Rows",
    "TaskTicket",
    "TicketRef",
    "claimed_groups",
    "claims_path",
    "private_leftovers",
    "private_name",
    "report_path",
    "take",
    "taken_path",
    "ticket_path",
    "write_report",
]

logger = logging.getLogger(__name__)

_WAIT_S = 120.0  # at most this long for the tasks still holding a ticket (a stuck worker: warn, go on)


class JobCancelledError(LogCleanerError):
    """A task found its round's ticket gone: the job was cancelled or has failed."""


def ticket_path(directory: str, end_offset: int) -> str:
    return os.path.join(directory, file_name(end_offset, ".job.cleaned"))


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


Rows = list[Mapping[str, object]]

_POLL_S = 0.005  # how often a waiting driver looks for new report files: a stat per item not heard from


def report_path(directory: str, end_offset: int, range_index: int) -> str:
    return os.path.join(directory, file_name(end_offset, f".rows.{range_index}.cleaned"))


def private_name(path: str) -> str:
    """A name next to ``path`` that only this thread of this process writes, with ``path``'s suffix (a
    ``.cleaned`` one: the loader deletes what a killed task left): a file is written whole under it, then
    given ``path``'s name at once."""
    base, _, suffix = path.rpartition(".")
    return f"{base}-{os.getpid()}-{threading.get_ident()}.{suffix}"


def private_leftovers(directory: Path, end_offset: int) -> list[Path]:
    """The ``private_name`` files a task of the round ending at ``end_offset`` left half written when it was
    killed (its report, its item claim): for the driver to remove once no task holds the round's ticket."""
    return list(directory.glob(file_name(end_offset, ".*-[0-9]*-[0-9]*.cleaned")))


def write_report(path: str, rows: Sequence[Mapping[str, object]]) -> None:
    """The item's rows at ``path``, appearing whole (not durable: a crash ends the job, and the loader
    deletes the file)."""
    partial = private_name(path)
    with open(partial, "w", encoding="utf-8") as out:
        json.dump(rows, out)
    os.replace(partial, path)


class JobReports:
    """One job's reports on the driver: ``wait`` hands each item's ``(log, rows)`` to ``handle`` on the
    caller's thread, once. ``items``: each item's log and report path."""

    def __init__(self, items: Sequence[tuple[int, str]]) -> None:
        self._pending = list(items)
        self._woken = threading.Event()

    def wait(self, timeout_s: float, handle: Callable[[tuple[int, Rows]], None]) -> bool:
        """Up to ``timeout_s`` for a report or a ``wake``; every report already there goes to ``handle``.
        True once woken."""
        deadline = time.monotonic() + timeout_s
        while True:
            woken = self._woken.is_set()
            if self._hand_on(handle) or woken:
                return woken
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._woken.wait(min(_POLL_S, left))

    def wake(self) -> None:
        """End a ``wait`` now (the job's action has returned)."""
        self._woken.set()

    def _hand_on(self, handle: Callable[[tuple[int, Rows]], None]) -> bool:
        arrived = []
        for log, path in self._pending:
            try:
                with open(path, encoding="utf-8") as report:
                    arrived.append((log, path, json.load(report)))
            except FileNotFoundError:
                continue
        if not arrived:
            return False
        heard = {path for _log, path, _rows in arrived}
        self._pending = [(log, path) for log, path in self._pending if path not in heard]
        for log, _path, rows in arrived:
            handle((log, rows))
        return True


_ENTRY = struct.Struct("<i")


def claims_path(directory: str, end_offset: int) -> str:
    return os.path.join(directory, file_name(end_offset, ".claims.cleaned"))


def claimed_groups(
    path: str, partition: int, slots: Sequence[int], costs: Sequence[float]
) -> Generator[int, None, None]:
    """The slots this task cleans, each taken when the task asks for it: first those earlier attempts of
    ``partition`` took, then the free one of the highest cost, until none is free."""
    mine = partition + 1
    order = sorted(range(len(slots)), key=lambda i: (-costs[i], i))
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        taken_here: set[int] = set()
        while True:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                owners = _read_owners(fd, len(slots))
                again = [i for i in order if owners[i] == mine and i not in taken_here]
                free = [i for i in order if owners[i] == 0]
                pick = again[0] if again else free[0] if free else None
                if not again and pick is not None:
                    _claim(fd, pick, mine, path)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            if pick is None:
                return
            taken_here.add(pick)
            yield slots[pick]
    finally:
        os.close(fd)


def _read_owners(fd: int, groups: int) -> list[int]:
    """Each group's owner (0: free); a file shorter than that (new, or never written that far) reads 0."""
    data = os.pread(fd, groups * _ENTRY.size, 0).ljust(groups * _ENTRY.size, b"\0")
    return [owner for (owner,) in _ENTRY.iter_unpack(data)]


def _claim(fd: int, index: int, owner: int, path: str) -> None:
    if os.pwrite(fd, _ENTRY.pack(owner), index * _ENTRY.size) != _ENTRY.size:
        raise OSError(f"{path}: a claim was written short")


def taken_path(directory: str, end_offset: int) -> str:
    return os.path.join(directory, file_name(end_offset, ".taken.cleaned"))


def take(path: str, report: str, partition: int) -> bool:
    """Whether this attempt of ``partition`` cleans the item claimed at ``path``: it was free, or an earlier
    attempt of ``partition`` took it and left no ``report``."""
    if os.path.exists(report):
        return False
    own = private_name(path)
    with open(own, "w", encoding="ascii") as out:
        out.write(str(partition))
    try:
        os.link(own, path)
        return True
    except FileExistsError:
        with open(path, encoding="ascii") as claim:
            return claim.read() == str(partition)
    finally:
        os.unlink(own)

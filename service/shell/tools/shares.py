"""Inspections split over processes: ``explain`` and ``retention --dry-run`` at a broker's worth of logs.

A read-only load and the inspection after it are Python work holding the GIL: threads gain nothing
(two of them loading a dir took twice as long as one: ``service/storage/log_dir.py``), processes do. The
partition dirs of every log dir, in topic-partition order, are cut into contiguous shares, one a process:
at most one per CPU this process may keep busy (``service.core.cpus``), and each of at least
``PARTITIONS_PER_PROCESS`` partitions (below that a fork costs more than it saves, so a small dir is
inspected in this process alone, as before).

The first share is inspected here, each other one in a forked child, which sends back its result (or the
error it raised) pickled through a pipe and ends with ``os._exit``; the results are concatenated in share
order, so in topic-partition order, as one process would have produced them. An error is raised here as
its share raised it (the first share's in order), once every child has ended. A child loads only its share,
read-only (``ScratchCopies.selects``), with scratch copies in a folder of its own: nothing is written into
the log dirs by any of them, and each holds only its share's descriptors. A child does not release its
read-only LogManager (``outlives_its_share``): ``os._exit`` frees its memory and descriptors at once,
where abandoning and freeing thousands of logs one by one took a tenth of its time.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

from service.base.errors import InvalidInputError, LogCleanerError
from service.core.cpus import usable_cpus
from service.storage.log_files import parse_partition_dir_name
from service.storage.topic_partition import TopicPartition

__all__ = [
    "PARTITIONS_PER_PROCESS",
    "outlives_its_share",
    "partition_dir_names",
    "process_count",
    "run_in_shares",
]

logger = logging.getLogger(__name__)

PARTITIONS_PER_PROCESS = 2000

T = TypeVar("T")
Share = frozenset[str]


def partition_dir_names(
    log_dirs: Iterable[Path], selects: Callable[[TopicPartition], bool] | None = None
) -> list[str]:
    """The partition dir names of ``log_dirs`` (those ``selects`` keeps), in topic-partition order."""
    found: dict[str, tuple[str, int]] = {}  # name → (topic, partition): tuples sort in C
    for log_dir in log_dirs:
        with os.scandir(log_dir) as entries:
            names = [entry.name for entry in entries if entry.is_dir()]
        for name in names:
            try:
                parsed = parse_partition_dir_name(name)
            except InvalidInputError:
                continue  # the load logs it
            if parsed.kind in ("", "stray") and (  # a stray replica is listed by its share's explain
                selects is None or selects(TopicPartition(parsed.topic, parsed.partition))
            ):
                found[name] = (parsed.topic, parsed.partition)
    return sorted(found, key=found.__getitem__)


class _ForkedShare:
    """Set in a forked share's process, which ends with ``os._exit`` once it answered; what it keeps alive
    until then (only that process's own thread runs the share)."""

    is_this_process: ClassVar[bool] = False
    kept: ClassVar[list[object]] = []


def outlives_its_share(resource: object) -> bool:
    """In a forked share's process: keep ``resource`` alive until the process ends (``os._exit``, which
    releases its memory and descriptors) and return True, so that the caller does not release it piece by
    piece; elsewhere False (the caller releases it)."""
    if not _ForkedShare.is_this_process:
        return False
    _ForkedShare.kept.append(resource)
    return True


def process_count(partitions: int) -> int:
    """How many processes inspect ``partitions`` partitions (see the module docstring); one where a
    process cannot fork."""
    if not hasattr(os, "fork"):
        return 1
    return max(1, min(usable_cpus(), partitions // PARTITIONS_PER_PROCESS))


def run_in_shares(names: list[str], run_share: Callable[[Share], list[T]], processes: int) -> list[T]:
    """``run_share`` of each share of ``names`` (``processes`` of them), concatenated in order."""
    size = max(1, -(-len(names) // max(processes, 1)))
    shares = [frozenset(names[i : i + size]) for i in range(0, len(names), size)] or [frozenset()]
    children = [_fork(run_share, share) for share in shares[1:]]
    try:
        results = run_share(shares[0])
    except BaseException:
        for child in children:
            child.abandon()
        raise
    outcomes = [child.receive() for child in children]
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    for outcome in outcomes:
        results.extend(outcome)  # type: ignore[arg-type]  # not an exception: a share's result list
    return results


@dataclass(frozen=True, slots=True)
class _Child:
    """A forked process inspecting one share; ``answers`` is the read end of its pipe."""

    pid: int
    answers: int

    def receive(self) -> list[object] | BaseException:
        """Its result, or the error it raised (or one saying it gave no answer); it has ended after."""
        with os.fdopen(self.answers, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(self.pid, 0)
        if not data:
            return LogCleanerError(
                f"an inspection process (pid {self.pid}) ended without an answer: wait status {status}"
            )
        answer: list[object] | BaseException = pickle.loads(data)
        return answer

    def abandon(self) -> None:
        """Stop listening (its write fails, and it ends) and wait for it to end."""
        os.close(self.answers)
        os.waitpid(self.pid, 0)


def _fork(run_share: Callable[[Share], list[T]], share: Share) -> _Child:
    answers, answer = os.pipe()
    pid = os.fork()
    if pid:
        os.close(answer)
        return _Child(pid, answers)
    try:  # the child: never returns into the caller's frames
        _ForkedShare.is_this_process = True
        os.close(answers)
        data = _pickled(run_share, share)
        with os.fdopen(answer, "wb") as pipe:
            pipe.write(data)
    except BaseException:  # a closed pipe (the parent failed first): nothing to tell
        os._exit(1)
    os._exit(0)


def _pickled(run_share: Callable[[Share], list[T]], share: Share) -> bytes:
    try:
        return pickle.dumps(run_share(share), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as exc:  # sent back whole, raised by the parent
        try:
            data = pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
            pickle.loads(data)  # an error whose constructor takes keywords cannot be rebuilt there
        except Exception:
            data = pickle.dumps(_substitute(exc), protocol=pickle.HIGHEST_PROTOCOL)
        return data


def _substitute(exc: BaseException) -> BaseException:
    """An error the CLI maps to the same exit code, with the same message."""
    if isinstance(exc, LogCleanerError) and isinstance(exc, (ValueError, LookupError)):
        return InvalidInputError(str(exc))
    if isinstance(exc, LogCleanerError):
        return LogCleanerError(str(exc))
    if isinstance(exc, OSError):
        return OSError(exc.errno, str(exc))
    return LogCleanerError(f"{type(exc).__name__}: {exc}")

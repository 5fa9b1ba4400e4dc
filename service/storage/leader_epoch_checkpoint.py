"""The ``leader-epoch-checkpoint`` file of a partition dir (Kafka ``LeaderEpochCheckpointFile``).

Which leader epoch each range of offsets was written in: entry ``epoch start_offset`` says that the
batches from ``start_offset`` on (up to the next entry's start) carry ``epoch``. UTF-8 text, version 0,
the same frame as the offset checkpoints::

    0              <- version, must be exactly 0
    2              <- N, the number of entry lines
    0 0            <- <epoch> <start offset>, N lines, ascending in both
    1 90

Lines end in ``\\n`` when written; ``\\r\\n`` and ``\\r`` are accepted when read (Java ``readLine``), an
entry splits on runs of whitespace into exactly two integers. An empty file is an empty list. The file
is replaced whole, crash-safely, whenever the cache changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from service.base.errors import CorruptDataError
from service.storage.atomic import write_atomically
from service.storage.checkpoints import split_lines

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "LEADER_EPOCH_CHECKPOINT_VERSION",
    "EpochEntry",
    "decode_leader_epoch_checkpoint",
    "encode_leader_epoch_checkpoint",
    "read_leader_epoch_checkpoint",
    "write_leader_epoch_checkpoint",
]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
LEADER_EPOCH_CHECKPOINT_VERSION = 0

_WHITESPACE = re.compile(r"[ \t\x0b\f]+")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_MAX_SHOWN_CHARS = 80


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """Batches from ``start_offset`` on carry leader epoch ``epoch`` (until the next entry)."""

    epoch: int
    start_offset: int

    def to_json(self) -> dict[str, int | str]:
        return {"epoch": self.epoch, "start_offset": self.start_offset}


def encode_leader_epoch_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    items = list(entries)
    for e in items:
        if not (_INT32[0] <= e.epoch <= _INT32[1] and _INT64[0] <= e.start_offset <= _INT64[1]):
            raise ValueError(f"leader epoch entry out of range: {e!r}")
    lines = [str(LEADER_EPOCH_CHECKPOINT_VERSION), str(len(items))]
    lines.extend(f"{e.epoch} {e.start_offset}" for e in items)
    return ("\n".join(lines) + "\n").encode("utf-8")


def decode_leader_epoch_checkpoint(data: bytes, path: str | None = None) -> list[EpochEntry]:
    """The entries of checkpoint bytes; raises CorruptDataError naming the line and byte position."""
    lines = split_lines(data)
    if not lines:
        return []
    version = _parse_int(lines[0], 1, "the version", _INT32, path)
    if version != LEADER_EPOCH_CHECKPOINT_VERSION:
        raise CorruptDataError(
            f"line 1: leader epoch checkpoint version {version} is not supported; only version "
            f"{LEADER_EPOCH_CHECKPOINT_VERSION} is",
            path=path,
            position=0,
        )
    if len(lines) == 1:
        return []
    expected = _parse_int(lines[1], 2, "the entry count", _INT32, path)
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        fields = _WHITESPACE.split(_text(line, number, path).rstrip(" \t\x0b\f"))
        if len(fields) != 2 or not all(_INTEGER.fullmatch(f) for f in fields):
            raise CorruptDataError(
                f"line {number}: expected '<epoch> <start offset>', got {_text(line, number, path)!r}",
                path=path,
                position=line[0],
            )
        epoch, start = int(fields[0]), int(fields[1])
        if not (_INT32[0] <= epoch <= _INT32[1] and _INT64[0] <= start <= _INT64[1]):
            raise CorruptDataError(
                f"line {number}: the epoch must be a 32-bit and the start offset a 64-bit integer",
                path=path,
                position=line[0],
            )
        entries.append(EpochEntry(epoch, start))
    if len(entries) != expected:
        raise CorruptDataError(
            f"line 2 says {expected} entries but the file has {len(entries)} entry lines",
            path=path,
            position=lines[1][0],
        )
    return entries


def read_leader_epoch_checkpoint(directory: Path) -> list[EpochEntry] | None:
    """The entries of ``directory``'s checkpoint, or None when it has none."""
    path = directory / LEADER_EPOCH_CHECKPOINT
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return decode_leader_epoch_checkpoint(data, path=str(path))


def write_leader_epoch_checkpoint(directory: Path, entries: Iterable[EpochEntry]) -> None:
    write_atomically(directory / LEADER_EPOCH_CHECKPOINT, encode_leader_epoch_checkpoint(entries))


def _text(line: tuple[int, bytes], number: int, path: str | None) -> str:
    try:
        return line[1].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(
            f"line {number} is not valid UTF-8: {line[1][:_MAX_SHOWN_CHARS]!r}",
            path=path,
            position=line[0] + exc.start,
        ) from exc


def _parse_int(
    line: tuple[int, bytes], number: int, what: str, bounds: tuple[int, int], path: str | None
) -> int:
    text = _text(line, number, path)
    if not _INTEGER.fullmatch(text) or not bounds[0] <= int(text) <= bounds[1]:
        raise CorruptDataError(
            f"line {number}: {what} must be an integer, got {text[:_MAX_SHOWN_CHARS]!r}",
            path=path,
            position=line[0],
        )
    return int(text)

"""Producer-state snapshot files (``<20-digit offset>.snapshot``, Kafka ``ProducerStateManager``).

A snapshot holds, for every producer the log knows, what a broker needs to go on deduplicating its
batches and tracking its open transaction without reading the log again. The number in the name is the
snapshot's *end offset*: the state is that of the log up to (not including) that offset. Layout, all
big-endian, version 1::

    0   int16   version (1)
    2   uint32  CRC-32C of every byte from offset 6 to the end
    6   int32   number of entries
    10  entries, 46 bytes each:
          int64 producer id      int16 producer epoch    int32 last sequence
          int64 last offset      int32 offset delta      int64 timestamp
          int32 coordinator epoch                        int64 current txn first offset (-1: none)

``offset delta`` is the last batch's last offset minus its first (so its first sequence is the last
sequence minus the delta); ``timestamp`` is that batch's max timestamp. Snapshots are written whole,
crash-safely (``write_atomically``); a torn or foreign file fails its CRC or length check, and the
reader then rebuilds the state from the segments instead.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from service.base.errors import CorruptDataError
from service.storage.atomic import write_atomically
from service.storage.index_file import read_whole_file
from service.storage.log_files import SNAPSHOT_SUFFIX, segment_path
from service.storage.records import crc32c_of

__all__ = [
    "ENTRY_SIZE",
    "HEADER_SIZE",
    "SNAPSHOT_VERSION",
    "ProducerSnapshotEntry",
    "decode_snapshot",
    "encode_snapshot",
    "list_snapshot_offsets",
    "read_snapshot",
    "snapshot_path",
    "write_snapshot",
]

SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
HEADER_SIZE = _HEADER.size  # 10
ENTRY_SIZE = _ENTRY.size  # 46
_CRC_START = 6  # the CRC covers the entry count and the entries
_NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer as a snapshot stores it (field names as the dump's JSON shows them)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int = _NO_OFFSET

    def to_json(self) -> dict[str, int | str]:
        return {
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "last_sequence": self.last_sequence,
            "last_offset": self.last_offset,
            "offset_delta": self.offset_delta,
            "timestamp": self.timestamp,
            "coordinator_epoch": self.coordinator_epoch,
            "current_txn_first_offset": self.current_txn_first_offset,
        }


def encode_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    """The bytes of a version-1 snapshot of ``entries`` (layout in the module docstring)."""
    items = list(entries)
    buf = bytearray(HEADER_SIZE + ENTRY_SIZE * len(items))
    _HEADER.pack_into(buf, 0, SNAPSHOT_VERSION, 0, len(items))
    for i, e in enumerate(items):
        try:
            _ENTRY.pack_into(
                buf,
                HEADER_SIZE + i * ENTRY_SIZE,
                e.producer_id,
                e.producer_epoch,
                e.last_sequence,
                e.last_offset,
                e.offset_delta,
                e.timestamp,
                e.coordinator_epoch,
                e.current_txn_first_offset,
            )
        except struct.error as exc:
            raise ValueError(f"producer snapshot entry out of range: {e!r}") from exc
    struct.pack_into(">I", buf, 2, crc32c_of(memoryview(buf)[_CRC_START:]))
    return bytes(buf)


def decode_snapshot(data: bytes, path: str | None = None) -> list[ProducerSnapshotEntry]:
    """The entries of snapshot bytes; ``path`` only names the file in errors.

    Raises CorruptDataError (with the byte position) for a short file, a version other than 1, a CRC
    mismatch, or an entry count that does not match the file's length.
    """
    if len(data) < HEADER_SIZE:
        raise CorruptDataError(
            f"producer snapshot is {len(data)} bytes, shorter than its {HEADER_SIZE}-byte header",
            path=path,
            position=0,
        )
    version, stored_crc, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptDataError(
            f"producer snapshot version {version} is not supported; only version {SNAPSHOT_VERSION} is",
            path=path,
            position=0,
        )
    computed = crc32c_of(memoryview(data)[_CRC_START:])
    if computed != stored_crc:
        raise CorruptDataError(
            f"producer snapshot CRC mismatch: stored {stored_crc:#010x}, computed {computed:#010x}",
            path=path,
            position=2,
        )
    expected = HEADER_SIZE + count * ENTRY_SIZE
    if count < 0 or expected != len(data):
        raise CorruptDataError(
            f"producer snapshot says {count} entries of {ENTRY_SIZE} bytes but holds "
            f"{len(data) - HEADER_SIZE} bytes after its header",
            path=path,
            position=6,
        )
    return [
        ProducerSnapshotEntry(*_ENTRY.unpack_from(data, HEADER_SIZE + i * ENTRY_SIZE)) for i in range(count)
    ]


def snapshot_path(directory: Path, offset: int) -> Path:
    return segment_path(directory, offset, SNAPSHOT_SUFFIX)


def list_snapshot_offsets(directory: Path, names: Iterable[str] | None = None) -> list[int]:
    """End offsets of the snapshot files in ``directory`` (or among ``names``, its listing if the caller
    has one), ascending (temporary names are skipped)."""
    offsets = []
    for name in os.listdir(directory) if names is None else names:
        if name.endswith(SNAPSHOT_SUFFIX):
            stem = name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isascii() and stem.isdigit():
                offsets.append(int(stem))
    return sorted(offsets)


def read_snapshot(path: Path | str) -> list[ProducerSnapshotEntry]:
    file = os.fspath(path)
    return decode_snapshot(read_whole_file(file), path=file)  # a bare descriptor: no buffered file object


def write_snapshot(directory: Path, offset: int, entries: Iterable[ProducerSnapshotEntry]) -> Path:
    """Write the snapshot ending at ``offset`` crash-safely; returns its path."""
    path = snapshot_path(directory, offset)
    write_atomically(path, encode_snapshot(entries))
    return path

"""Reading the files of a KRaft metadata log: the newest snapshot, then the segments' batches after it.

The metadata log is the partition dir ``__cluster_metadata-0`` in ``metadata.log.dir`` (else the first of
``log.dirs``). It holds, as Kafka's ``KafkaMetadataLog`` writes them:

- segments ``<20-digit base offset>.log`` of record batches (magic 2), each record value a metadata
  record (``records.py``); control batches (LeaderChange, KRaftVersion, Voters) carry no metadata;
- snapshots ``<20-digit end offset>-<10-digit epoch>.checkpoint`` (Kafka ``Snapshots``): batches framed by
  a SnapshotHeader control batch first and a SnapshotFooter control batch last, holding the whole image
  as of the end offset. A snapshot is written as ``.checkpoint.part`` and renamed when complete, so a
  ``.checkpoint`` file is whole: any flaw in one is corruption. ``.part`` and ``.deleted`` files are
  ignored.

The image is the newest snapshot's records, then every segment record at or past its end offset.

Crash behaviour: a broker killed mid-write leaves a torn tail on the last segment (an incomplete batch, or
zeros). Kafka's recovery truncates it; this reader stops before it, reading up to the last valid batch.
Corruption anywhere else (an earlier segment, a batch followed by more data, a snapshot) raises
``CorruptDataError`` naming the file and byte position. Nothing here ever writes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

from service.base.errors import CorruptDataError
from service.metadata.records import IMAGE_RECORD_KEYS, MetadataRecord, decode_metadata_record
from service.storage.control import ControlRecordType, decode_control_type
from service.storage.file_records import iter_file_batches
from service.storage.records import LOG_OVERHEAD, RecordBatch, peek_batch_size

__all__ = [
    "METADATA_PARTITION_DIR",
    "MetadataEntry",
    "MetadataLogFiles",
    "find_metadata_log",
    "read_metadata_log",
    "read_segment",
    "read_segment_from",
    "read_snapshot",
]

METADATA_PARTITION_DIR = "__cluster_metadata-0"
_SEGMENT_NAME = re.compile(r"^([0-9]{20})\.log$")
_SNAPSHOT_NAME = re.compile(r"^([0-9]{20})-([0-9]{10})\.checkpoint$")


@dataclass(frozen=True, slots=True)
class MetadataEntry:
    """One metadata record with its offset, and where it was read (for messages)."""

    offset: int
    record: MetadataRecord
    path: str
    position: int
    in_snapshot: bool = False  # a snapshot's offsets count its own records, not the log's


@dataclass(frozen=True, slots=True)
class MetadataLogFiles:
    """The files of one metadata log: its newest snapshot (if any) and its segments by base offset."""

    directory: Path
    snapshot: Path | None
    snapshot_end_offset: int
    segments: tuple[Path, ...]


def find_metadata_log(metadata_log_dir: Path) -> MetadataLogFiles | None:
    """The metadata log under ``metadata_log_dir``, or None if it has none (a ZooKeeper-era log dir)."""
    directory = metadata_log_dir / METADATA_PARTITION_DIR
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    segments: list[tuple[int, str]] = []
    snapshots: list[tuple[int, int, str]] = []
    for name in names:
        if match := _SEGMENT_NAME.match(name):
            segments.append((int(match.group(1)), name))
        elif match := _SNAPSHOT_NAME.match(name):
            snapshots.append((int(match.group(1)), int(match.group(2)), name))
    newest = max(snapshots, default=None)
    return MetadataLogFiles(
        directory,
        directory / newest[2] if newest else None,
        newest[0] if newest else 0,
        tuple(directory / name for _, name in sorted(segments)),
    )


def read_metadata_log(files: MetadataLogFiles) -> Iterator[MetadataEntry]:
    """The snapshot's records, then the segments' records at or past the snapshot's end offset."""
    if files.snapshot is not None:
        yield from read_snapshot(files.snapshot)
    for i, segment in enumerate(files.segments):
        is_last = i == len(files.segments) - 1
        yield from read_segment(segment, is_last=is_last, from_offset=files.snapshot_end_offset)


def read_snapshot(path: Path) -> Iterator[MetadataEntry]:
    """The metadata records of a ``.checkpoint`` snapshot; its header and footer are checked."""
    shown = str(path)
    size = os.path.getsize(path)
    seen_header = False
    footer_at: int | None = None
    for batch in _batches(path, 0, size):
        if footer_at is not None:
            raise CorruptDataError(
                "a batch follows the snapshot's footer", path=shown, position=batch.position
            )
        if batch.is_control:
            control = _control_type(batch, shown)
            if not seen_header and control is not ControlRecordType.SNAPSHOT_HEADER:
                raise CorruptDataError(
                    f"a snapshot starts with a SnapshotHeader control batch, found {control.name}",
                    path=shown,
                    position=batch.position,
                )
            seen_header = True
            if control is ControlRecordType.SNAPSHOT_FOOTER:
                footer_at = batch.position
            continue
        if not seen_header:
            raise CorruptDataError(
                "a snapshot starts with a SnapshotHeader control batch, found a data batch",
                path=shown,
                position=batch.position,
            )
        yield from _entries(batch, shown, from_offset=0, in_snapshot=True)
    if footer_at is None:
        raise CorruptDataError(
            "the snapshot ends without a SnapshotFooter control batch (incomplete)", path=shown, position=size
        )


def read_segment(path: Path, *, is_last: bool, from_offset: int = 0) -> Iterator[MetadataEntry]:
    """The metadata records of one segment at or past ``from_offset`` (control batches skipped).

    On the last segment a torn tail ends the reading quietly, as Kafka's recovery truncates it.
    """
    yield from read_segment_from(path, 0, is_last=is_last, from_offset=from_offset)


def read_segment_from(
    path: Path, start: int, *, is_last: bool, from_offset: int = 0
) -> Generator[MetadataEntry, None, int]:
    """``read_segment`` from byte position ``start`` (a batch boundary: where an earlier reading of the
    same file ended); returns the position after the last whole batch read, where the next reading of
    this file goes on (before a torn tail, which a broker still writing it completes)."""
    shown = str(path)
    size = os.path.getsize(path)
    end = start
    batches = _batches(path, start, size)
    try:
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return end
            except CorruptDataError as exc:  # the batch framing or its CRC; a record's content is never torn
                if is_last and exc.position is not None and _is_torn_tail(path, exc.position, size):
                    return end
                raise
            end = batch.position + batch.size_bytes
            if batch.is_control or batch.last_offset < from_offset:
                continue
            yield from _entries(batch, shown, from_offset=from_offset)
    finally:
        batches.close()


def _batches(path: Path, start: int, size: int) -> Generator[RecordBatch, None, None]:
    fd = os.open(path, os.O_RDONLY)
    try:
        yield from iter_file_batches(fd, start, size, path=str(path))
    finally:
        os.close(fd)


def _entries(
    batch: RecordBatch, shown: str, *, from_offset: int, in_snapshot: bool = False
) -> Iterator[MetadataEntry]:
    try:
        records = batch.records()
    except CorruptDataError as exc:
        raise exc.at(path=shown) from exc
    for record in records:
        if record.offset < from_offset:
            continue
        try:
            decoded = decode_metadata_record(record.value, only=IMAGE_RECORD_KEYS)
        except CorruptDataError as exc:
            raise CorruptDataError(
                f"record at offset {record.offset}: {exc.reason}", path=shown, position=batch.position
            ) from exc
        yield MetadataEntry(record.offset, decoded, shown, batch.position, in_snapshot)


def _control_type(batch: RecordBatch, shown: str) -> ControlRecordType:
    try:
        records = batch.records()
        if not records:
            raise CorruptDataError("a control batch without a record")
        return decode_control_type(records[0].key)
    except CorruptDataError as exc:
        raise CorruptDataError(exc.reason, path=shown, position=batch.position) from exc


def _is_torn_tail(path: Path, position: int, size: int) -> bool:
    """Whether the bad bytes at ``position`` are the unfinished last write: a batch that reaches (or
    claims to reach past) the end of the file, or nothing but zeros up to it."""
    with path.open("rb") as file:
        file.seek(position)
        rest = file.read(size - position)
    if len(rest) < LOG_OVERHEAD or not any(rest):
        return True
    return position + peek_batch_size(rest) >= size

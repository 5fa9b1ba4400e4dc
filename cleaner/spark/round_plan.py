"""A round's plan on the driver: all it decides before any record is read, the transaction state each group
starts from included.

Everything a parallel round decides on the driver before any record is read (Kafka ``doClean``'s set-up).

The same steps as ``Cleaner.clean``, in the same order: the upper bound rounded down to a segment base;
the dirty section [first dirty, upper bound); the end offset (the key map holds the whole dirty section, so
it is always the upper bound: the map's latest offset is upper bound − 1); the groups of every segment
below it but the active one (``group_segments_by_size``); each group's aborted-transaction lists and
starting transaction state (``replay_headers``, below); the active producers (``ProducerScan``, as the
in-process round sees them before each group: nothing the round swaps in changes them). The producers' scan
(in C, without the GIL) runs on a thread of its own while the header replay (Python) runs: both only read.

Transaction state where each group starts, and the dirty section's aborted batches, from batch headers.

The in-process cleaner carries one ``CleanedTransactionMetadata`` through the groups in log order; groups
cleaned in parallel each need the state as it stands at their first batch. That state depends only on
batch headers, control records and the aborted-transaction lists, never on keys (``txn_metadata``), so
the driver replays exactly the calls ``clean_group`` makes (aborted txns added as each segment starts,
``on_batch_read``/``on_control_batch_read`` per batch) reading only headers, and copies the state at each
group boundary. Non-transactional data batches only advance the aborted-txn heap
(``on_plain_batch_read``); only control batches, which are small, are read whole.

The same pass replays what ``build_offset_map`` does with its own state over the dirty section (from the
offset-index position of the first dirty offset in each dirty segment): which data batches belong to
aborted transactions (their keys never enter the key map) and the map pass's byte and record counts.
Cost: one sequential read of the headers below the round's end, on the driver (as Kafka's producer-state
scan does; past a large batch only the next header is read); the records are decoded only by the tasks.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

from cleaner.compaction.cleaner import group_aborted_txns, round_down_to_segment
from cleaner.compaction.grouping import group_segments_by_size
from cleaner.compaction.offset_map import segments_overlapping
from cleaner.compaction.rules import LastRecord, ProducerScan
from cleaner.compaction.txn_metadata import CleanedTransactionMetadata, collect_aborted_txns
from cleaner.native import scan_batch_runs
from service.base.errors import CorruptDataError
from service.storage.log import PartitionLog
from service.storage.records import (
    BATCH_HEADER,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RecordBatch,
    decode_batch,
)
from service.storage.segment import LogSegment
from service.storage.txn_index import AbortedTxn

__all__ = ["GroupPlan", "MapScan", "ReplayResult", "RoundPlan", "plan_round", "replay_headers"]


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """One group of segments, cleaned into one segment based at its first segment's base offset."""

    segments: tuple[LogSegment, ...]
    aborted_txns: tuple[tuple[AbortedTxn, ...], ...]  # clean_group's aborted_txns, per segment
    txn_state: CleanedTransactionMetadata  # before the group's first batch

    @property
    def base_offset(self) -> int:
        return self.segments[0].base_offset


@dataclass(frozen=True, slots=True)
class RoundPlan:
    first_dirty_offset: int
    upper_bound: int  # rounded down to a segment base
    end_offset: int  # the next round's first dirty offset
    now_ms: int
    has_dirty_segments: bool
    groups: tuple[GroupPlan, ...]
    active_producers: Mapping[int, LastRecord]
    map_scan: MapScan

    @property
    def map_latest_offset(self) -> int:
        return self.end_offset - 1


def plan_round(
    log: PartitionLog, first_dirty_offset: int, upper_bound_offset: int, now_ms: int
) -> RoundPlan | None:
    """The round over [first dirty, upper bound) as ``Cleaner.clean`` would run it; None if it is empty."""
    segments = log.segments
    upper = round_down_to_segment(segments, upper_bound_offset)
    if upper < first_dirty_offset:
        return None
    dirty = segments_overlapping(segments, first_dirty_offset, upper)
    end_offset = upper
    below_end = [s for s in segments_overlapping(segments, 0, end_offset) if s is not segments[-1]]
    groups = group_segments_by_size(
        below_end, log.config.segment_bytes, log.config.segment_index_bytes, upper
    )
    aborted = [group_aborted_txns(segments, group) for group in groups]
    with ThreadPoolExecutor(1, thread_name_prefix="logcleaner-producers") as pool:
        producers = pool.submit(ProducerScan().refresh, log)
        replay = replay_headers(groups, aborted, segments, dirty, first_dirty_offset, upper)
        active_producers = producers.result()
    return RoundPlan(
        first_dirty_offset=first_dirty_offset,
        upper_bound=upper,
        end_offset=end_offset,
        now_ms=now_ms,
        has_dirty_segments=bool(dirty),
        groups=tuple(
            GroupPlan(tuple(group), tuple(tuple(txns) for txns in lists), state)
            for group, lists, state in zip(groups, aborted, replay.group_start_states, strict=True)
        ),
        active_producers=active_producers,
        map_scan=replay.map_scan,
    )


_CHUNK_BYTES = 1 << 20
_LARGE_BATCH_BYTES = 8 << 10  # after a batch this large, the next read is the next header alone
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20


@dataclass(frozen=True, slots=True)
class MapScan:
    """The map pass, replayed: data batches whose keys stay out of the map, and what it would read."""

    aborted_batches: tuple[int, ...]  # base offsets of aborted data batches in the dirty section
    bytes_read: int
    records_read: int


@dataclass(frozen=True, slots=True)
class ReplayResult:
    group_start_states: tuple[CleanedTransactionMetadata, ...]  # one per group, before its first batch
    map_scan: MapScan


class _Header(NamedTuple):
    position: int
    fields: tuple[int, ...]  # BATCH_HEADER's fields

    @property
    def size(self) -> int:
        return self.fields[1] + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.fields[0] + self.fields[6]


def replay_headers(
    groups: Sequence[Sequence[LogSegment]],
    group_aborted: Sequence[Sequence[Sequence[AbortedTxn]]],
    all_segments: Sequence[LogSegment],
    dirty: Sequence[LogSegment],
    first_dirty_offset: int,
    upper_bound: int,
) -> ReplayResult:
    """One pass over the groups' headers: the group start states and the dirty section's ``MapScan``."""
    clean_state = CleanedTransactionMetadata()
    map_state = CleanedTransactionMetadata()
    if dirty:
        map_state.add_aborted_transactions(
            collect_aborted_txns(all_segments, first_dirty_offset, upper_bound)
        )
    map_from = {id(s): s.offset_index.lookup(first_dirty_offset).position for s in dirty}
    starts: list[CleanedTransactionMetadata] = []
    aborted_batches: list[int] = []
    bytes_read = records_read = 0
    for group, aborted_lists in zip(groups, group_aborted, strict=True):
        starts.append(clean_state.copy())
        for segment, aborted in zip(group, aborted_lists, strict=True):
            clean_state.add_aborted_transactions(aborted)
            map_position = map_from.get(id(segment))
            with _HeaderReader(segment) as reader:
                for header in reader.batches(-1 if map_position is None else map_position):
                    if isinstance(header, _PlainRun):  # plain batches only move the states on
                        clean_state.on_plain_batch_read(header.last_offset)
                        if map_position is not None and header.position >= map_position:
                            map_state.on_plain_batch_read(header.last_offset)
                            bytes_read += header.size
                            records_read += header.records
                        continue
                    attributes = header.fields[5]
                    control = reader.read_batch(header) if attributes & _CONTROL_BIT else None
                    _advance(clean_state, header, control)
                    if map_position is None or header.position < map_position:
                        continue
                    if _advance(map_state, header, control):
                        aborted_batches.append(header.fields[0])
                    bytes_read += header.size
                    records_read += 1 if control is not None else header.fields[12]
    return ReplayResult(tuple(starts), MapScan(tuple(aborted_batches), bytes_read, records_read))


def _advance(state: CleanedTransactionMetadata, header: _Header, control: RecordBatch | None) -> bool:
    """The call ``clean_group`` makes for this batch; True for a data batch of an aborted transaction."""
    if control is not None:
        state.on_control_batch_read(control)
        return False
    if not header.fields[5] & _TRANSACTIONAL_BIT:
        state.on_plain_batch_read(header.last_offset)
        return False
    return state.on_batch_read(_header_only_batch(header))


def _header_only_batch(header: _Header) -> RecordBatch:
    """A ``RecordBatch`` of the header fields alone (no bytes): enough for ``on_batch_read``."""
    f = header.fields
    return RecordBatch(
        f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11], f[12], b"", header.position
    )


class _PlainRun(NamedTuple):
    """Consecutive plain data batches (neither transactional nor control) of one segment."""

    position: int
    size: int
    last_offset: int
    records: int


class _HeaderReader:
    """Batch headers of one ``.log`` in 1 MiB reads; whole batches on request (control batches only)."""

    def __init__(self, segment: LogSegment) -> None:
        self._path = str(segment.log_path)
        self._end = segment.size_bytes
        self._fd = -1

    def __enter__(self) -> _HeaderReader:
        self._fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
        return self

    def __exit__(self, *_exc: object) -> None:
        os.close(self._fd)

    def batches(self, split: int) -> Iterator[_Header | _PlainRun]:
        """The segment's batches in order, consecutive plain ones as one ``_PlainRun`` (not crossing the
        position ``split``), in C (``native.scan_batch_runs``); where C stops (a damaged header), or without
        C, ``headers`` goes on, one batch at a time, and raises the error that names the damage."""
        scanned = scan_batch_runs(self._fd, self._end, split)
        if scanned is None:
            yield from self.headers(0)
            return
        reached, rows, headers = scanned
        other = 0
        for at in range(0, len(rows), 5):
            kind, position, size, last_offset, records = rows[at : at + 5]
            if kind == 0:
                yield _PlainRun(position, size, last_offset, records)
            else:
                yield _Header(position, BATCH_HEADER.unpack_from(headers, other))
                other += RECORD_BATCH_OVERHEAD
        if reached < self._end:
            yield from self.headers(reached)

    def headers(self, start: int) -> Iterator[_Header]:
        """Read 1 MiB at a time while batches are small; after a large one, only the next header (most of
        a log of large batches is then never copied out of the page cache)."""
        position, end = start, self._end
        buf, buf_start = b"", 0
        last_size = 0
        while position < end:
            if position + RECORD_BATCH_OVERHEAD > buf_start + len(buf):
                want = _CHUNK_BYTES if last_size < _LARGE_BATCH_BYTES else RECORD_BATCH_OVERHEAD
                buf, buf_start = os.pread(self._fd, min(want, end - position), position), position
                if len(buf) < RECORD_BATCH_OVERHEAD:
                    raise CorruptDataError(
                        f"incomplete batch header: {len(buf)} bytes left", path=self._path, position=position
                    )
            header = _Header(position, BATCH_HEADER.unpack_from(buf, position - buf_start))
            if header.size < RECORD_BATCH_OVERHEAD or position + header.size > end:
                raise CorruptDataError(
                    f"batch size {header.size} does not fit the segment ({end - position} bytes left)",
                    path=self._path,
                    position=position,
                )
            yield header
            position += header.size
            last_size = header.size

    def read_batch(self, header: _Header) -> RecordBatch:
        data = os.pread(self._fd, header.size, header.position)
        try:
            return decode_batch(data, 0, position=header.position, verify_crc=True)
        except CorruptDataError as exc:
            raise exc.at(path=self._path) from exc

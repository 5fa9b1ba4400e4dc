"""One split of a segment as Arrow record batches: the rows of the ``kafka-log`` data source.

One row per record (control records included, ``is_control`` true; an empty batch gives no row), with the
record's fields and its batch's header fields. Only the requested columns are built: the cleaner asks for
five narrow ones and never pays for values or headers. Records come from the storage layer's decoder
(its C fast path when built), batches with their CRC checked, so a corrupt batch fails the read with the
file and position, as the in-process cleaner would.

Columns, in the full schema's order (``COLUMNS``; Spark types in ``spark_ddl``):
topic, partition, segment_base_offset, offset, timestamp, timestamp_type ("CreateTime"/"LogAppendTime"),
key, value (null: a tombstone), headers (list of {key, value}), batch_base_offset, batch_last_offset,
position (the batch's byte position in the ``.log``), producer_id, producer_epoch, base_sequence,
is_transactional, is_control, delete_horizon_ms (null when the batch has none), partition_leader_epoch,
compression ("none", "gzip", "snappy", "lz4", "zstd").
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa

from cleaner.spark.segment_splits import SegmentSplit
from service.storage.file_records import iter_file_batches
from service.storage.records import Record, RecordBatch

__all__ = ["COLUMNS", "DEFAULT_ROWS_PER_BATCH", "read_split", "spark_ddl"]

DEFAULT_ROWS_PER_BATCH = 65_536

_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])

# name → (Arrow type, Spark DDL type)
COLUMNS: dict[str, tuple[pa.DataType, str]] = {
    "topic": (pa.string(), "string"),
    "partition": (pa.int32(), "int"),
    "segment_base_offset": (pa.int64(), "bigint"),
    "offset": (pa.int64(), "bigint"),
    "timestamp": (pa.int64(), "bigint"),
    "timestamp_type": (pa.string(), "string"),
    "key": (pa.binary(), "binary"),
    "value": (pa.binary(), "binary"),
    "headers": (pa.list_(_HEADER), "array<struct<key:string,value:binary>>"),
    "batch_base_offset": (pa.int64(), "bigint"),
    "batch_last_offset": (pa.int64(), "bigint"),
    "position": (pa.int64(), "bigint"),
    "producer_id": (pa.int64(), "bigint"),
    "producer_epoch": (pa.int32(), "int"),
    "base_sequence": (pa.int32(), "int"),
    "is_transactional": (pa.bool_(), "boolean"),
    "is_control": (pa.bool_(), "boolean"),
    "delete_horizon_ms": (pa.int64(), "bigint"),
    "partition_leader_epoch": (pa.int32(), "int"),
    "compression": (pa.string(), "string"),
}

_RecordColumn = Callable[[list[Record]], list[object]]
_BatchValue = Callable[[SegmentSplit, RecordBatch], object]

_RECORD_COLUMNS: dict[str, _RecordColumn] = {
    "offset": lambda records: [r[0] for r in records],
    "timestamp": lambda records: [r[1] for r in records],
    "key": lambda records: [r[2] for r in records],
    "value": lambda records: [r[3] for r in records],
    "headers": lambda records: [[{"key": h[0], "value": h[1]} for h in r[4]] for r in records],
}

_BATCH_VALUES: dict[str, _BatchValue] = {
    "topic": lambda split, _batch: split.topic,
    "partition": lambda split, _batch: split.partition,
    "segment_base_offset": lambda split, _batch: split.segment_base_offset,
    "timestamp_type": lambda _split, batch: batch.timestamp_type.label,
    "batch_base_offset": lambda _split, batch: batch.base_offset,
    "batch_last_offset": lambda _split, batch: batch.last_offset,
    "position": lambda _split, batch: batch.position,
    "producer_id": lambda _split, batch: batch.producer_id,
    "producer_epoch": lambda _split, batch: batch.producer_epoch,
    "base_sequence": lambda _split, batch: batch.base_sequence,
    "is_transactional": lambda _split, batch: batch.is_transactional,
    "is_control": lambda _split, batch: batch.is_control,
    "delete_horizon_ms": lambda _split, batch: batch.delete_horizon_ms,
    "partition_leader_epoch": lambda _split, batch: batch.partition_leader_epoch,
    "compression": lambda _split, batch: batch.compression.label,
}


def spark_ddl(columns: Sequence[str]) -> str:
    """The Spark schema of ``columns``, as a DDL string (``"offset bigint, key binary"``)."""
    return ", ".join(f"`{name}` {COLUMNS[name][1]}" for name in columns)


def read_split(
    split: SegmentSplit, columns: Sequence[str], *, rows_per_batch: int = DEFAULT_ROWS_PER_BATCH
) -> Iterator[pa.RecordBatch]:
    """The split's records in [from_offset, until_offset) as record batches of ``columns``."""
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown:
        raise ValueError(f"unknown kafka-log columns {unknown}; known: {list(COLUMNS)}")
    builder = _Builder(split, columns)
    fd = os.open(split.log_path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        batches = iter_file_batches(
            fd, split.start_position, split.end_position, path=split.log_path, verify_crc=True
        )
        for batch in batches:
            if batch.base_offset >= split.until_offset:
                break
            if batch.last_offset < split.from_offset or batch.records_count == 0:
                continue
            records = batch.records()
            if records and (
                records[0].offset < split.from_offset or records[-1].offset >= split.until_offset
            ):
                records = [r for r in records if split.from_offset <= r.offset < split.until_offset]
            if records:
                builder.add(batch, records)
            if builder.rows >= rows_per_batch:
                yield builder.flush()
    finally:
        os.close(fd)
    if builder.rows:
        yield builder.flush()


class _Builder:
    """Column lists for the requested columns, turned into one ``pa.RecordBatch`` per ``flush``."""

    def __init__(self, split: SegmentSplit, columns: Sequence[str]) -> None:
        self._split = split
        self._names = list(columns)
        self._schema = pa.schema([pa.field(name, COLUMNS[name][0]) for name in self._names])
        self._record_columns = [
            (name, _RECORD_COLUMNS[name]) for name in self._names if name in _RECORD_COLUMNS
        ]
        self._batch_columns = [(name, _BATCH_VALUES[name]) for name in self._names if name in _BATCH_VALUES]
        self._data: dict[str, list[object]] = {name: [] for name in self._names}
        self.rows = 0

    def add(self, batch: RecordBatch, records: list[Record]) -> None:
        count = len(records)
        for name, extract in self._record_columns:
            self._data[name].extend(extract(records))
        for name, value_of in self._batch_columns:
            self._data[name].extend([value_of(self._split, batch)] * count)
        self.rows += count

    def flush(self) -> pa.RecordBatch:
        arrays = [pa.array(self._data[name], type=COLUMNS[name][0]) for name in self._names]
        self._data = {name: [] for name in self._names}
        self.rows = 0
        return pa.RecordBatch.from_arrays(arrays, schema=self._schema)

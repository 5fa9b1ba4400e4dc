"""The ``kafka-log`` Spark data source: segment files as a Spark table, each split's records as Arrow batches.

``spark.read.format("kafka-log")``: Kafka segment files as a Spark table (PySpark Python data source).

    spark.read.format("kafka-log").load("/var/kafka/logs")            # every partition of a log dir
    spark.read.format("kafka-log").option("fromOffset", 1000).load("/var/kafka/logs/orders-0")

One row per record; the columns are listed below. Options: ``fromOffset`` (inclusive) and
``untilOffset`` (exclusive) keep the records in that range and skip whole segments outside it;
``maxSplitBytes`` (default 64 MiB) is the largest byte range one input partition reads (segments are cut
at offset-index entries, so no split starts inside a batch). A user schema that names a subset of the
columns (``.schema("offset bigint, key binary")``) builds only those: the cheap way to scan big logs.

The files are read where the tasks run, so on a cluster every executor must see the log dirs at the same
path (shared storage). Reading a live log sees the segments listed when the query was planned; a segment
that retention or the cleaner replaces meanwhile fails the query, which can simply be run again.

One split of a segment as Arrow record batches: the rows of the ``kafka-log`` data source.

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from cleaner.spark.segment_splits import DEFAULT_SPLIT_BYTES, SegmentSplit, plan_splits
from service.base.errors import InvalidInputError
from service.storage.file_records import iter_file_batches
from service.storage.log_config import LONG_MAX
from service.storage.records import Record, RecordBatch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "COLUMNS",
    "DEFAULT_ROWS_PER_BATCH",
    "FORMAT",
    "KafkaLogDataSource",
    "read_split",
    "register_kafka_log_source",
    "spark_ddl",
]

FORMAT = "kafka-log"


def register_kafka_log_source(spark: SparkSession) -> None:
    """Make ``format("kafka-log")`` known to ``spark`` (``SparkSessionHolder`` does it as it starts one;
    call it yourself for a session of your own; registering again is harmless)."""
    spark.dataSource.register(KafkaLogDataSource)


class KafkaLogDataSource(DataSource):
    """The ``kafka-log`` format: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return spark_ddl(list(COLUMNS))

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaLogReader(self.options, schema)


class KafkaLogReader(DataSourceReader):
    """Plans one input partition per split (driver side) and decodes a split into Arrow (executor side)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        path = options.get("path")
        if not path:
            raise InvalidInputError('kafka-log needs a path: .load("<log dir or partition dir>")')
        self.path = path
        self.from_offset = _int_option(options, "fromOffset", 0)
        self.until_offset = _int_option(options, "untilOffset", LONG_MAX)
        self.max_split_bytes = _int_option(options, "maxSplitBytes", DEFAULT_SPLIT_BYTES)
        self.columns = _check_schema(schema)

    def partitions(self) -> Sequence[InputPartition]:
        splits = plan_splits(
            self.path,
            from_offset=self.from_offset,
            until_offset=self.until_offset,
            max_split_bytes=self.max_split_bytes,
        )
        return [InputPartition(split) for split in splits]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        split = partition.value
        if split is None:  # Spark's stand-in when there is no split at all (no segment, or empty ones)
            return iter(())
        if not isinstance(split, SegmentSplit):
            raise TypeError(f"kafka-log: unexpected input partition {partition!r}")
        return read_split(split, self.columns)


def _int_option(options: Mapping[str, str], name: str, default: int) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError as exc:
        raise InvalidInputError(f"kafka-log option {name}={raw!r}: expected an integer") from exc
    if value < 0:
        raise InvalidInputError(f"kafka-log option {name}={raw!r}: must be >= 0")
    return value


def _check_schema(schema: StructType) -> list[str]:
    """The requested column names; each must be one of ours, with our type (a subset, in any order)."""
    names = []
    for field in schema.fields:
        known = COLUMNS.get(field.name)
        if known is None:
            raise InvalidInputError(f"kafka-log has no column {field.name!r}; columns: {', '.join(COLUMNS)}")
        if field.dataType.simpleString() != known[1]:
            raise InvalidInputError(
                f"kafka-log column {field.name!r} is {known[1]}, not {field.dataType.simpleString()}"
            )
        names.append(field.name)
    return names


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

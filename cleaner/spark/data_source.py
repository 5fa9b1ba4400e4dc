"""``spark.read.format("kafka-log")``: Kafka segment files as a Spark table (PySpark Python data source).

    spark.read.format("kafka-log").load("/var/kafka/logs")            # every partition of a log dir
    spark.read.format("kafka-log").option("fromOffset", 1000).load("/var/kafka/logs/orders-0")

One row per record; the columns are listed in ``arrow_records``. Options: ``fromOffset`` (inclusive) and
``untilOffset`` (exclusive) keep the records in that range and skip whole segments outside it;
``maxSplitBytes`` (default 64 MiB) is the largest byte range one input partition reads (segments are cut
at offset-index entries, so no split starts inside a batch). A user schema that names a subset of the
columns (``.schema("offset bigint, key binary")``) builds only those: the cheap way to scan big logs.

The files are read where the tasks run, so on a cluster every executor must see the log dirs at the same
path (shared storage). Reading a live log sees the segments listed when the query was planned; a segment
that retention or the cleaner replaces meanwhile fails the query, which can simply be run again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from cleaner.spark.arrow_records import COLUMNS, read_split, spark_ddl
from cleaner.spark.segment_splits import DEFAULT_SPLIT_BYTES, SegmentSplit, plan_splits
from service.errors import InvalidInputError
from service.storage.log_config import LONG_MAX

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

__all__ = ["FORMAT", "KafkaLogDataSource", "register_kafka_log_source"]

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

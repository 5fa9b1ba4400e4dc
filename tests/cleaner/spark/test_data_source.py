"""The ``kafka-log`` data source: Spark SQL over generated logs reads what the storage layer reads."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from cleaner.spark.data_source import COLUMNS, register_kafka_log_source
from cleaner.spark.segment_splits import plan_splits
from cleaner.spark.session import SparkSessionHolder
from service.base.clock import ManualClock
from service.shell.tools.gen import GenOptions, generate
from service.storage.compression import CompressionType
from service.storage.file_records import iter_file_batches
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig
from service.storage.records import Header, Record
from tests.cleaner.spark.random_logs import START_MS, Op, Writer


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two generated partitions (lz4, tombstones, several segments), a transactional one with markers, and
    a delete-policy one with an unkeyed record and headers."""
    root = tmp_path_factory.mktemp("logs")
    options = GenOptions(
        log_dir=root,
        partitions=2,
        records=3_000,
        batch_size=50,
        keys=200,
        tombstones=0.1,
        compression=CompressionType.LZ4,
        segment_bytes=16_384,
        seed=7,
    )
    generate(options, clock=ManualClock(START_MS))
    txn_dir = root / "txn-0"
    txn_dir.mkdir()
    clock = ManualClock(START_MS)
    writer = Writer(load_partition_log(txn_dir, LogConfig(segment_bytes=600), clock=clock).log, clock)
    writer.apply(
        [
            Op("txn", 1, ((b"a", b"1"), (b"b", None))),
            Op("idem", 10, ((b"c", b"2"),)),
            Op("end", 1, commit=False),
            Op("txn", 2, ((b"a", b"3"),), codec=CompressionType.GZIP),
            Op("end", 2, commit=True),
        ]
    )
    writer.log.append_records([Record(0, START_MS, None, b"unkeyed", (Header("h", b"v"), Header("n", None)))])
    writer.log.close()
    return root


def expected_rows(log_dir: Path) -> list[tuple[Any, ...]]:
    """Every record under ``log_dir`` as the data source's full row, from the storage layer's own reader."""
    rows = []
    for directory in sorted(p for p in log_dir.iterdir() if p.is_dir()):
        topic, _, partition = directory.name.rpartition("-")
        for log_file in sorted(directory.glob("*.log")):
            fd = os.open(log_file, os.O_RDONLY)
            try:
                for batch in iter_file_batches(fd, 0, log_file.stat().st_size, path=str(log_file)):
                    for record in batch.records():
                        rows.append(
                            (
                                topic,
                                int(partition),
                                int(log_file.name.split(".")[0]),
                                record.offset,
                                record.timestamp,
                                batch.timestamp_type.label,
                                record.key,
                                record.value,
                                [(h.key, h.value) for h in record.headers],
                                batch.base_offset,
                                batch.last_offset,
                                batch.position,
                                batch.producer_id,
                                batch.producer_epoch,
                                batch.base_sequence,
                                batch.is_transactional,
                                batch.is_control,
                                batch.delete_horizon_ms,
                                batch.partition_leader_epoch,
                                batch.compression.label,
                            )
                        )
            finally:
                os.close(fd)
    return sorted(rows, key=lambda r: (r[0], r[1], r[3]))


def as_tuples(rows: list[Any]) -> list[tuple[Any, ...]]:
    out = []
    for row in rows:
        values = list(row)
        if "headers" in row.__fields__:
            i = row.__fields__.index("headers")
            values[i] = [(h["key"], h["value"]) for h in values[i]]
        out.append(tuple(bytes(v) if isinstance(v, bytearray) else v for v in values))
    return out


@pytest.fixture(scope="module")
def spark(spark_holder: SparkSessionHolder) -> SparkSession:
    session = spark_holder.get()
    register_kafka_log_source(session)
    return session


def test_sql_over_a_log_dir_reads_what_the_storage_layer_reads(spark: SparkSession, log_dir: Path) -> None:
    spark.read.format("kafka-log").load(str(log_dir)).createOrReplaceTempView("kafka_log")
    rows = spark.sql("SELECT * FROM kafka_log ORDER BY topic, partition, offset").collect()
    assert list(rows[0].__fields__) == list(COLUMNS)
    expected = expected_rows(log_dir)
    assert {r[0] for r in expected} == {"gen-0", "txn"}
    assert any(r[16] for r in expected), "control records are rows too"
    assert any(r[6] is None for r in expected) and any(r[7] is None for r in expected)
    assert as_tuples(rows) == expected


def test_sql_aggregates_keys_like_a_dict_over_the_records(spark: SparkSession, log_dir: Path) -> None:
    frame = spark.read.format("kafka-log").load(str(log_dir / "gen-0-1"))
    frame.createOrReplaceTempView("partition_log")
    latest = spark.sql("SELECT key, max(offset) AS latest FROM partition_log GROUP BY key").collect()
    expected: dict[bytes, int] = {}
    for row in expected_rows(log_dir):
        if row[:2] == ("gen-0", 1):
            expected[row[6]] = max(expected.get(row[6], -1), row[3])
    assert {bytes(r["key"]): r["latest"] for r in latest} == expected


def test_offset_options_and_small_splits_select_the_same_records(spark: SparkSession, log_dir: Path) -> None:
    directory = log_dir / "gen-0-0"
    reader = spark.read.format("kafka-log").schema("offset bigint, key binary, position bigint")
    ranged = reader.option("fromOffset", 1_234).option("untilOffset", 2_345).option("maxSplitBytes", 2_000)
    frame = ranged.load(str(directory))
    assert frame.rdd.getNumPartitions() > len(list(directory.glob("*.log")))
    offsets = [r["offset"] for r in frame.orderBy("offset").collect()]
    assert offsets == list(range(1_234, 2_345))
    whole = {r["offset"]: (r["key"], r["position"]) for r in reader.load(str(directory)).collect()}
    assert {r["offset"]: (r["key"], r["position"]) for r in frame.collect()} == {o: whole[o] for o in offsets}


@pytest.mark.parametrize(
    ("schema", "message"),
    [("offset bigint, nope binary", "no column 'nope'"), ("offset int", "'offset' is bigint, not int")],
)
def test_a_user_schema_must_name_our_columns_with_our_types(
    spark: SparkSession, log_dir: Path, schema: str, message: str
) -> None:
    with pytest.raises(PySparkException, match=message):
        spark.read.format("kafka-log").schema(schema).load(str(log_dir)).collect()


def test_splits_start_at_the_index_entry_and_cut_at_batch_starts(log_dir: Path) -> None:
    directory = log_dir / "gen-0-0"
    splits = plan_splits(directory, from_offset=1_000, max_split_bytes=3_000)
    first = splits[0]
    assert first.segment_base_offset <= 1_000 and first.start_position > 0
    for split in splits:
        fd = os.open(split.log_path, os.O_RDONLY)
        try:
            batches = list(
                iter_file_batches(fd, split.start_position, split.end_position, path=split.log_path)
            )
        finally:
            os.close(fd)
        assert batches and batches[0].position == split.start_position
        assert batches[-1].position + batches[-1].size_bytes == split.end_position
    holding = next(b for b in iter_batches_of(Path(first.log_path)) if b.last_offset >= 1_000)
    assert 0 < first.start_position <= holding.position


def iter_batches_of(log_file: Path) -> list[Any]:
    fd = os.open(log_file, os.O_RDONLY)
    try:
        return list(iter_file_batches(fd, 0, log_file.stat().st_size, path=str(log_file)))
    finally:
        os.close(fd)


def test_an_empty_log_dir_is_an_empty_table(spark: SparkSession, tmp_path: Path) -> None:
    register_kafka_log_source(spark)  # again: harmless
    assert spark.read.format("kafka-log").load(str(tmp_path)).count() == 0

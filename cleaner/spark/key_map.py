"""The key map, kept in Spark: each key's latest offset in the dirty section, exact key bytes, one pass.

Kafka's map is a fixed buffer of MD5 digests, so keys can collide and a large dirty section takes several
rounds. Here it is a Spark aggregation over the records below the round's end, grouped by the key bytes:

    latest(key) = max(offset) over the key's *mappable* records
                  (data records with offset ≥ first dirty, not in an aborted transaction — §12.2)
    groups(key) = the groups holding a record of the key (a bit set: ``bit_or`` of 64-bit words; past
                  ``MAX_BIT_WORDS`` words, a ``collect_set`` of group indexes, slower but not wider)

A hash aggregation (no sort), and each key then goes, as (slot, key, latest), to every group that holds
it, plus one marker row per group so that a group with nothing superseded is still rewritten (horizons,
transactions, empty batches). A group's task thus gets exactly the keys it can look up (a key sent to the
group of its own latest record is harmless: that record is not below its latest). ``repartition(groups,
slot)`` sends each group to its own task (``slots``). The map never reaches the driver: only its size
does, for ``max-buffer-utilization-percent``: each task counts the keys whose latest offset falls in its
group's offset range, so every mapped key is counted exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cleaner.spark.arrow_records import spark_ddl
from cleaner.spark.data_source import FORMAT
from cleaner.spark.rewrite import INPUT_DDL
from cleaner.spark.round_plan import RoundPlan

__all__ = ["SCAN_COLUMNS", "superseded_rows", "unpartitioned_superseded_rows"]

SCAN_COLUMNS = ("segment_base_offset", "offset", "key", "is_control")  # + batch_base_offset if needed
_WORD_BITS = 64
MAX_BIT_WORDS = 4  # up to 256 groups as bit sets (fixed-width aggregation buffers); then collect_set


def superseded_rows(
    spark: SparkSession,
    plan: RoundPlan,
    directory: Path,
    slots: Sequence[int],
    *,
    max_split_bytes: int,
) -> DataFrame:
    """(slot, key, latest) for every key mapped in the dirty section, to each group holding the key."""
    rows = unpartitioned_superseded_rows(spark, plan, directory, slots, max_split_bytes=max_split_bytes)
    return rows.repartition(len(slots), "slot")


def unpartitioned_superseded_rows(
    spark: SparkSession,
    plan: RoundPlan,
    directory: Path,
    slots: Sequence[int],
    *,
    max_split_bytes: int,
) -> DataFrame:
    """``superseded_rows`` before the repartition: one log's share of a job that cleans several logs
    (their rows are unioned, then repartitioned by slot once; each log's keys are aggregated apart)."""
    markers = spark.createDataFrame([(slot, None, None) for slot in slots], INPUT_DDL)
    if not plan.has_dirty_segments:  # a rewrite-only round: nothing is superseded
        return markers
    segment_groups = spark.createDataFrame(
        [(s.base_offset, i) for i, group in enumerate(plan.groups) for s in group.segments],
        "segment_base_offset bigint, group_index int",
    )
    aborted = list(plan.map_scan.aborted_batches)
    columns = [*SCAN_COLUMNS, "batch_base_offset"] if aborted else list(SCAN_COLUMNS)
    records = (
        spark.read.format(FORMAT)
        .schema(spark_ddl(columns))
        .option("untilOffset", str(plan.end_offset))
        .option("maxSplitBytes", str(max_split_bytes))
        .load(str(directory))
        .where(~F.col("is_control") & F.col("key").isNotNull())
        .join(F.broadcast(segment_groups), "segment_base_offset")
    )
    mappable = F.col("offset") >= F.lit(plan.first_dirty_offset)
    if aborted:  # aborted data never enters the map (a broadcast of batch offsets, not of keys)
        aborted_batches = spark.createDataFrame(
            [(o, True) for o in aborted], "batch_base_offset bigint, aborted boolean"
        )
        records = records.join(F.broadcast(aborted_batches), "batch_base_offset", "left")
        mappable = mappable & F.col("aborted").isNull()
    latest = F.max(F.when(mappable, F.col("offset"))).alias("latest")
    words = (len(slots) + _WORD_BITS - 1) // _WORD_BITS
    if words <= MAX_BIT_WORDS:
        bits = [_group_bits(word).alias(f"bits_{word}") for word in range(words)]
        keys = records.groupBy("key").agg(latest, *bits).where(F.col("latest").isNotNull())
        group_indexes = _group_indexes(len(slots), words)
    else:
        keys = records.groupBy("key").agg(latest, F.collect_set("group_index").alias("groups"))
        keys = keys.where(F.col("latest").isNotNull())
        group_indexes = F.col("groups")
    slot_of = F.array(*(F.lit(slot) for slot in slots))
    rows = keys.select("key", "latest", F.explode(group_indexes).alias("group_index")).select(
        F.element_at(slot_of, F.col("group_index") + 1).alias("slot"), "key", "latest"
    )
    return rows.unionByName(markers)


def _group_bits(word: int) -> Column:
    """The key's groups 64·word … 64·word+63 as the bits of one long (``bit_or`` over its records)."""
    low = word * _WORD_BITS
    in_word = (F.col("group_index") >= low) & (F.col("group_index") < low + _WORD_BITS)
    return F.bit_or(F.when(in_word, F.expr(f"shiftleft(1L, group_index - {low})")))


def _group_indexes(groups: int, words: int) -> Column:
    """The set bits of every ``bits_<word>`` column, as one array of group indexes."""
    parts = []
    for word in range(words):
        low, bits, name = word * _WORD_BITS, min(_WORD_BITS, groups - word * _WORD_BITS), f"bits_{word}"
        indexes = F.expr(
            f"transform(filter(sequence(0, {bits - 1}), i -> (({name} >> i) & 1) = 1), i -> i + {low})"
        )
        parts.append(F.coalesce(F.when(F.col(name) != 0, indexes), F.array().cast("array<int>")))
    return parts[0] if words == 1 else F.concat(*parts)

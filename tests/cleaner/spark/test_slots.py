"""Slot values: our Murmur3 is Spark's ``hash(int)``; ``repartition(n, slot)`` puts slot i in partition i."""

from __future__ import annotations

from pyspark.sql import functions as F

from cleaner.spark.session import SparkSessionHolder
from cleaner.spark.slots import murmur3_int, slots_for


def test_murmur3_is_sparks_hash_of_an_int(spark_holder: SparkSessionHolder) -> None:
    values = [0, 1, 2, 42, -1, -(2**31), 2**31 - 1, 123_456_789]
    spark = spark_holder.get()
    frame = spark.createDataFrame([(v,) for v in values], "v int")
    hashes = {r["v"]: r["h"] for r in frame.select("v", F.hash("v").alias("h")).collect()}
    assert {v: murmur3_int(v) for v in values} == hashes


def test_repartition_by_slot_sends_slot_i_to_partition_i(spark_holder: SparkSessionHolder) -> None:
    slots = slots_for(7)
    assert len(set(slots)) == 7
    spark = spark_holder.get()
    frame = spark.createDataFrame([(s,) for s in slots], "slot int").repartition(7, "slot")
    placed = {r["slot"]: r["p"] for r in frame.select("slot", F.spark_partition_id().alias("p")).collect()}
    assert placed == {slot: i for i, slot in enumerate(slots)}

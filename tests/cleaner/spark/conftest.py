"""One SparkSession (``local[2]``) for the whole test session: Spark starts in seconds, a job takes less."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cleaner.spark.session import SparkSessionHolder

TEST_SPARK_CONF = {
    "spark.master": "local[2]",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
}


@pytest.fixture(scope="session")
def spark_holder() -> Iterator[SparkSessionHolder]:
    """Started here, before any test runs: PySpark's first DataFrame call imports IPython when it is
    installed, and IPython's jedi raises the recursion limit, which Hypothesis would report mid-test."""
    holder = SparkSessionHolder(TEST_SPARK_CONF)
    from pyspark.sql import functions as F

    holder.get().range(1).select(F.col("id")).collect()
    yield holder
    holder.stop()

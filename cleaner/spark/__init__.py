"""Compaction on Spark: ``engine.SparkEngine`` and the ``kafka-log`` data source (pyspark only in here)."""

__all__: list[str] = []

"""Kafka on-disk format: record batches, segments, indexes, checkpoints, logs."""

__all__: list[str] = []

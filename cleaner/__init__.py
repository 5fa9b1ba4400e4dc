"""Kafka's LogCleaner: the cleaner threads, their bookkeeping, the compaction rules and the engines."""

__all__: list[str] = []

"""Which logcleaner this is and which Kafka files it writes: the one source of ``logcleaner --version``,
the daemon's start-up line, the OpenAPI document's version and ``logcleaner_build_info``."""

from __future__ import annotations

from service.storage.records import CURRENT_MAGIC

__all__ = ["KAFKA_RELEASES", "package_version", "version_line"]

KAFKA_RELEASES = "3.x/4.x"  # the Kafka releases whose on-disk files logcleaner reads and writes byte for byte


def package_version() -> str:
    """The installed distribution's version; ``0+unknown`` when run from a tree that is not installed.
    (importlib.metadata is imported here: a command that prints no version does not pay for it.)"""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("logcleaner")
    except PackageNotFoundError:
        return "0+unknown"


def version_line() -> str:
    """``logcleaner 0.1.0 (Kafka 3.x/4.x log format, RecordBatch v2)``."""
    return f"logcleaner {package_version()} (Kafka {KAFKA_RELEASES} log format, RecordBatch v{CURRENT_MAGIC})"

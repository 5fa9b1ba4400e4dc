"""``version_line``: the installed distribution's version and the Kafka format it writes, one source for
``--version``, the start-up line, the OpenAPI version and ``logcleaner_build_info``."""

from __future__ import annotations

from importlib.metadata import version

from service.core.version import KAFKA_RELEASES, package_version, version_line
from service.storage.records import CURRENT_MAGIC


def test_the_version_is_the_installed_distributions() -> None:
    assert package_version() == version("logcleaner")


def test_the_version_line_names_the_format() -> None:
    assert CURRENT_MAGIC == 2
    assert (
        version_line()
        == f"logcleaner {version('logcleaner')} (Kafka {KAFKA_RELEASES} log format, RecordBatch v2)"
    )

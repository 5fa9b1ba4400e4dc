"""A log dir's ``meta.properties`` (Kafka ``MetaProperties``): the broker that owns the dir.

A broker writes it into every log dir it opens, with ``node.id`` (KRaft) or ``broker.id`` (ZooKeeper era). A
dir without one was never a broker's: logcleaner made it, and is the only replica of its logs
(``service.storage.log_dir``).
"""

from __future__ import annotations

from pathlib import Path

from service.base.errors import CorruptDataError
from service.config.properties import read_properties
from service.storage.log_files import META_PROPERTIES_FILE

__all__ = ["META_PROPERTIES_FILE", "read_node_id"]


def read_node_id(log_dir: Path) -> int | None:
    """``node.id`` (KRaft) or ``broker.id`` (ZooKeeper era) of the dir's ``meta.properties``; None if none."""
    path = log_dir / META_PROPERTIES_FILE
    if not path.is_file():
        return None
    props = read_properties(path)
    raw = props.get("node.id", props.get("broker.id"))
    if raw is None:
        return None
    try:
        return int(raw.strip())
    except ValueError as exc:
        raise CorruptDataError(f"node.id {raw!r} is not an integer", path=str(path)) from exc

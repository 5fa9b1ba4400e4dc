"""The clean-shutdown marker ``.kafka_cleanshutdown`` of a log dir (Kafka ``CleanShutdownFileHandler``).

The marker says the dir's logs were flushed and closed, so loading may skip recovery. Kafka 3.8+ writes
``{"version":0,"brokerEpoch":<long>}``; 3.7 wrote ``{"version":"0","broker_epoch":"<long>"}``; older
brokers an empty file. Its presence is what matters: unreadable content counts as "no epoch" (-1).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from service.base.errors import InvalidInputError
from service.storage.atomic import fsync_dir, write_atomically
from service.storage.log_files import CLEAN_SHUTDOWN_FILE

__all__ = [
    "CLEAN_SHUTDOWN_VERSION",
    "NO_BROKER_EPOCH",
    "read_clean_shutdown_marker",
    "remove_clean_shutdown_marker",
    "write_clean_shutdown_marker",
]

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_VERSION = 0
NO_BROKER_EPOCH = -1

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")  # Long.parseLong syntax, ASCII digits only
_MAX_SHOWN_CHARS = 80


def write_clean_shutdown_marker(log_dir: Path, broker_epoch: int = NO_BROKER_EPOCH) -> None:
    """Write ``.kafka_cleanshutdown`` in ``log_dir`` as Kafka 3.8+ does, crash-safely."""
    if isinstance(broker_epoch, bool) or not isinstance(broker_epoch, int):
        raise InvalidInputError(f"broker epoch must be an int, got {broker_epoch!r}")
    if not _INT64_MIN <= broker_epoch <= _INT64_MAX:
        raise InvalidInputError(f"broker epoch {broker_epoch} is outside the signed 64-bit range")
    payload = {"version": CLEAN_SHUTDOWN_VERSION, "brokerEpoch": broker_epoch}
    write_atomically(log_dir / CLEAN_SHUTDOWN_FILE, json.dumps(payload, separators=(",", ":")).encode())


def read_clean_shutdown_marker(log_dir: Path) -> int | None:
    """The broker epoch in ``log_dir``'s marker; None when there is no marker (the last stop was unclean).

    An empty marker (Kafka before 3.7) gives -1; so does content we cannot read, with a warning, as in
    Kafka, because the marker's presence alone says the shutdown was clean.
    """
    path = log_dir / CLEAN_SHUTDOWN_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if not data.strip():
        return NO_BROKER_EPOCH
    epoch = _decode_broker_epoch(data)
    if epoch is None:
        logger.warning(
            "clean-shutdown marker %s holds no readable broker epoch (%r); using %d",
            path,
            data[:_MAX_SHOWN_CHARS],
            NO_BROKER_EPOCH,
        )
        return NO_BROKER_EPOCH
    return epoch


def remove_clean_shutdown_marker(log_dir: Path) -> None:
    """Delete ``log_dir``'s marker, if any, durably: a crash after this must not look like a clean stop."""
    (log_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
    fsync_dir(log_dir)


def _decode_broker_epoch(data: bytes) -> int | None:
    """The epoch from any marker format Kafka has written, or None if there is none to read."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    try:
        content = json.loads(text)
    except ValueError:
        content = None
    if isinstance(content, dict):
        for key in ("brokerEpoch", "broker_epoch"):  # Kafka 3.8+, Kafka 3.7
            if key in content:
                return _as_int64(content[key])
        return None
    # The first KIP-966 form (Scala handler): "version: 0" and "brokerEpoch: <long>" lines.
    match = re.search(r"^brokerEpoch:\s+(\S+)\s*$", text, re.MULTILINE)
    return _as_int64(match.group(1)) if match else None


def _as_int64(value: object) -> int | None:
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if _INT64_MIN <= value <= _INT64_MAX else None

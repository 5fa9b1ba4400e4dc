"""Kafka's offset checkpoint files (the clean-shutdown marker is in ``clean_shutdown``).

Offset checkpoint format (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``cleaner-offset-checkpoint``; Kafka ``OffsetCheckpointFile`` on ``CheckpointFile``), UTF-8 text::

    0                          <- version, must be exactly 0
    2                          <- N, the number of entry lines
    foo 1 5                    <- <topic> <partition> <offset>, N lines
    bar 2 10

Each line ends in ``\\n`` when written; entries are written sorted by topic-partition so equal maps give
equal bytes (Kafka writes map order; order carries no meaning). Reading follows Kafka's
``CheckpointReadBuffer`` exactly, so we accept what Kafka accepts and reject what it rejects:

- lines end in ``\\n``, ``\\r\\n`` or ``\\r`` (Java ``BufferedReader.readLine``);
- an empty file, or a file holding only the version line, is an empty map;
- the version and count lines are bare integers (no surrounding spaces); a version other than 0 fails;
- an entry line splits on runs of whitespace (space, tab, form feed, vertical tab) into exactly three
  fields: topic, int32 partition, int64 offset. Trailing whitespace is ignored; leading whitespace
  yields an empty first field, so the line fails, as in Kafka;
- the number of entry lines must equal N; a repeated topic-partition keeps its last offset.

Topics are not checked on read (Kafka does not); entries are matched against the logs on disk. On
write, every topic must be a valid Kafka topic name, which guarantees it holds no whitespace.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Collection, Mapping
from pathlib import Path

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.atomic import write_atomically
from service.storage.log_files import is_valid_topic_name
from service.storage.topic_partition import TopicPartition

__all__ = [
    "CHECKPOINT_VERSION",
    "OffsetCheckpointFile",
    "decode_checkpoint",
    "encode_checkpoint",
    "split_lines",
]

logger = logging.getLogger(__name__)

CHECKPOINT_VERSION = 0

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_LINE_END = re.compile(rb"\r\n|\r|\n")
# Java's default ``\s``; CR and LF never reach it because lines are split on them first.
_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
# Integer.parseInt / Long.parseLong syntax, ASCII digits only (Java also takes other Unicode digits,
# which no checkpoint writer produces).
_INTEGER = re.compile(r"[+-]?[0-9]+")
_MAX_SHOWN_CHARS = 80
# The shape Kafka's and our writers give a checkpoint: "0", the count, then "<topic> <partition> <offset>"
# lines, each ending in "\n", the topics in Kafka's legal characters. A file of that shape is read by one
# regular expression (a start-up reads a line per partition in each of three files); any other goes through
# the line-by-line reading, which gives the same map or names the bad line.
_CANONICAL = re.compile(rb"0\n([0-9]{1,10})\n((?:[A-Za-z0-9._-]+ [0-9]{1,10} -?[0-9]{1,19}\n)*)")
_CANONICAL_ENTRY = re.compile(rb"([A-Za-z0-9._-]+) ([0-9]+) (-?[0-9]+)\n")


def encode_checkpoint(entries: Mapping[TopicPartition, int]) -> bytes:
    """The checkpoint file bytes for ``entries`` (format in the module docstring).

    Raises InvalidInputError for an entry Kafka could not read back: a topic that is not a valid topic
    name, a partition outside 0..2^31-1 or an offset outside the signed 64-bit range.
    """
    for tp, offset in entries.items():
        _check_entry(tp, offset)
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    lines.extend(f"{tp.topic} {tp.partition} {entries[tp]}" for tp in sorted(entries))
    return ("\n".join(lines) + "\n").encode("utf-8")


def decode_checkpoint(data: bytes, path: str | None = None) -> dict[TopicPartition, int]:
    """Parse checkpoint bytes by Kafka's reading rules; ``path`` only names the file in errors.

    Raises CorruptDataError naming the file, the line number and the byte position of the bad line.
    """
    canonical = _decode_canonical(data)
    if canonical is not None:
        return canonical
    lines = split_lines(data)
    if not lines:
        return {}
    version = _parse_int(lines[0], 1, "the version", _INT32_MIN, _INT32_MAX, path)
    if version != CHECKPOINT_VERSION:
        raise CorruptDataError(
            f"line 1: checkpoint version {version} is not supported; only version {CHECKPOINT_VERSION} is",
            path=path,
            position=0,
        )
    if len(lines) == 1:
        return {}
    expected = _parse_int(lines[1], 2, "the entry count", _INT32_MIN, _INT32_MAX, path)
    entries: dict[TopicPartition, int] = {}
    for line_number, line in enumerate(lines[2:], start=3):
        tp, offset = _decode_entry(line, line_number, path)
        entries[tp] = offset
    found = len(lines) - 2
    if found != expected:
        position = lines[2 + expected][0] if 0 <= expected < found else len(data)
        raise CorruptDataError(
            f"line 2 says {expected} entries but the file has {found} entry lines",
            path=path,
            position=position,
        )
    return entries


def _decode_canonical(data: bytes) -> dict[TopicPartition, int] | None:
    """``decode_checkpoint``'s map of a file of the writers' shape (``_CANONICAL``) whose count and
    numbers are in range; None for any other file."""
    match = _CANONICAL.fullmatch(data)
    if match is None:
        return None
    rows = _CANONICAL_ENTRY.findall(match.group(2))
    if int(match.group(1)) != len(rows):
        return None
    entries: dict[TopicPartition, int] = {}
    for topic, partition, offset in rows:
        tp, value = TopicPartition(topic.decode("ascii"), int(partition)), int(offset)
        if tp.partition > _INT32_MAX or not _INT64_MIN <= value <= _INT64_MAX:
            return None
        entries[tp] = value
    return entries


class OffsetCheckpointFile:
    """One offset checkpoint file in a log dir, read and replaced whole.

    A missing file reads as an empty map (Kafka creates it empty on open; the meaning is the same).
    Writes go through :func:`write_atomically`, so a crash leaves the old or the new checkpoint, never
    a torn one. ``_lock`` serialises reads and writes of this object, because concurrent writers
    would share one ``.tmp`` file; I/O errors other than a missing file propagate as ``OSError``.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self._path

    def read(self) -> dict[TopicPartition, int]:
        with self._lock:
            try:
                data = self._path.read_bytes()
            except FileNotFoundError:
                return {}
        return decode_checkpoint(data, path=str(self._path))

    def write(
        self, entries: Mapping[TopicPartition, int], *, carry_over: Collection[TopicPartition] = ()
    ) -> None:
        """Replace the file with ``entries``; the file's entries of the ``carry_over`` partitions that
        ``entries`` does not set are kept unchanged (logs the writer does not manage, such as a broker's
        ``-future`` or stray replicas, whose lines are the broker's). An unreadable file carries none over."""
        data = encode_checkpoint(entries)  # validate before touching the disk
        with self._lock:
            kept = self._entries_of(carry_over) if carry_over else {}
            if kept.keys() - entries.keys():
                data = encode_checkpoint({**kept, **entries})
            write_atomically(self._path, data)

    def _entries_of(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        try:
            current = decode_checkpoint(self._path.read_bytes(), path=str(self._path))
        except FileNotFoundError:
            return {}
        except CorruptDataError as exc:
            logger.warning("%s: its entries of logs not managed here are lost with it", exc)
            return {}
        return {tp: offset for tp, offset in current.items() if tp in partitions}

    def __repr__(self) -> str:
        return f"OffsetCheckpointFile({str(self._path)!r})"


def _check_entry(tp: TopicPartition, offset: int) -> None:
    if not isinstance(tp, TopicPartition):
        raise InvalidInputError(f"checkpoint keys must be TopicPartition, got {tp!r}")
    if not isinstance(tp.topic, str) or not is_valid_topic_name(tp.topic):
        raise InvalidInputError(
            f"cannot checkpoint topic {tp.topic!r}: a topic name is 1-249 characters of [a-zA-Z0-9._-], "
            "not '.' or '..'"
        )
    partition = tp.partition
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition <= _INT32_MAX:
        raise InvalidInputError(
            f"cannot checkpoint topic {tp.topic!r} partition {partition!r}: "
            f"a partition is an int in 0..{_INT32_MAX}"
        )
    if isinstance(offset, bool) or not isinstance(offset, int) or not _INT64_MIN <= offset <= _INT64_MAX:
        raise InvalidInputError(f"cannot checkpoint {tp} offset {offset!r}: an offset is a signed 64-bit int")


def split_lines(data: bytes) -> list[tuple[int, bytes]]:
    """(byte position, content) of each line, split as Java's ``BufferedReader.readLine`` does."""
    lines: list[tuple[int, bytes]] = []
    start = 0
    for match in _LINE_END.finditer(data):
        lines.append((start, data[start : match.start()]))
        start = match.end()
    if start < len(data):
        lines.append((start, data[start:]))
    return lines


def _decode_text(line: tuple[int, bytes], line_number: int, path: str | None) -> str:
    position, raw = line
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(
            f"line {line_number} is not valid UTF-8: {raw[:_MAX_SHOWN_CHARS]!r}",
            path=path,
            position=position + exc.start,
        ) from exc


def _parse_int(
    line: tuple[int, bytes], line_number: int, what: str, minimum: int, maximum: int, path: str | None
) -> int:
    text = _decode_text(line, line_number, path)
    if not _INTEGER.fullmatch(text) or not minimum <= int(text) <= maximum:
        raise CorruptDataError(
            f"line {line_number}: {what} must be an integer in {minimum}..{maximum}, "
            f"got {text[:_MAX_SHOWN_CHARS]!r}",
            path=path,
            position=line[0],
        )
    return int(text)


def _decode_entry(line: tuple[int, bytes], line_number: int, path: str | None) -> tuple[TopicPartition, int]:
    text = _decode_text(line, line_number, path)
    fields = _WHITESPACE.split(text)
    while fields and not fields[-1]:  # Java's String.split drops trailing empty strings
        fields.pop()
    if len(fields) != 3:
        raise CorruptDataError(
            f"line {line_number}: expected '<topic> <partition> <offset>' separated by whitespace, "
            f"got {text[:_MAX_SHOWN_CHARS]!r} ({len(fields)} fields)",
            path=path,
            position=line[0],
        )
    topic, partition_text, offset_text = fields
    partition_ok = _INTEGER.fullmatch(partition_text) and _INT32_MIN <= int(partition_text) <= _INT32_MAX
    offset_ok = _INTEGER.fullmatch(offset_text) and _INT64_MIN <= int(offset_text) <= _INT64_MAX
    if not partition_ok or not offset_ok:
        raise CorruptDataError(
            f"line {line_number}: the partition must be a 32-bit and the offset a 64-bit integer, "
            f"got {text[:_MAX_SHOWN_CHARS]!r}",
            path=path,
            position=line[0],
        )
    return TopicPartition(topic, int(partition_text)), int(offset_text)

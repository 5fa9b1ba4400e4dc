"""The ``partition.metadata`` file of a partition dir (Kafka ``PartitionMetadataFile``).

It ties the dir to its topic's id, so that a broker never mixes up two incarnations of a topic with the
same name. UTF-8 text, two lines, version 0 (Kafka writes no newline after the second)::

    version: 0
    topic_id: Hz3oQR9UTS6uzPXOAuqimw

Each line splits on ``:`` followed by whitespace into exactly two fields. The topic id is a 128-bit
UUID in Kafka's ``Uuid.toString`` form: URL-safe base64 without padding, 22 characters. The file is
written once, crash-safely, when the partition is created, and otherwise kept as it is.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from dataclasses import dataclass
from pathlib import Path

from service.base.errors import CorruptDataError
from service.storage.atomic import write_atomically
from service.storage.index_file import read_whole_file

__all__ = [
    "PARTITION_METADATA_FILE",
    "PARTITION_METADATA_VERSION",
    "PartitionMetadata",
    "decode_partition_metadata",
    "decode_topic_id",
    "encode_partition_metadata",
    "encode_topic_id",
    "new_topic_id",
    "read_partition_metadata",
    "write_partition_metadata",
]

PARTITION_METADATA_FILE = "partition.metadata"
PARTITION_METADATA_VERSION = 0

_UUID_BYTES = 16
_SEPARATOR = re.compile(r":\s+")
_LINE_END = re.compile(r"\r\n|\r|\n")
# Kafka's reserved ids: the zero id ("no id") and the id of the metadata topic.
_ZERO_ID = bytes(16)
_METADATA_TOPIC_ID = (1).to_bytes(16, "big")
_MAX_SHOWN_CHARS = 80


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    version: int
    topic_id: str  # Kafka's base64 form

    def to_json(self) -> dict[str, int | str]:
        return {"version": self.version, "topic_id": self.topic_id}


def encode_topic_id(raw: bytes) -> str:
    """Kafka's ``Uuid.toString``: 16 bytes as URL-safe base64 without padding."""
    if len(raw) != _UUID_BYTES:
        raise ValueError(f"a topic id is {_UUID_BYTES} bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_topic_id(text: str) -> bytes:
    """Kafka's ``Uuid.fromString``: raises ValueError unless ``text`` is 16 bytes in base64."""
    if len(text) > 24:
        raise ValueError(f"a topic id is at most 24 base64 characters, got {len(text)}")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"topic id {text!r} is not URL-safe base64") from exc
    if len(raw) != _UUID_BYTES:
        raise ValueError(f"topic id {text!r} decodes to {len(raw)} bytes, not {_UUID_BYTES}")
    return raw


def new_topic_id() -> str:
    """A fresh random topic id, as Kafka's ``Uuid.randomUuid`` picks one (never reserved, no leading '-')."""
    while True:
        raw = bytearray(os.urandom(_UUID_BYTES))
        raw[6] = (raw[6] & 0x0F) | 0x40  # a version-4 UUID, as Java's UUID.randomUUID
        raw[8] = (raw[8] & 0x3F) | 0x80
        text = encode_topic_id(bytes(raw))
        if bytes(raw) not in (_ZERO_ID, _METADATA_TOPIC_ID) and not text.startswith("-"):
            return text


def encode_partition_metadata(metadata: PartitionMetadata) -> bytes:
    decode_topic_id(metadata.topic_id)  # never write an id Kafka could not read back
    return f"version: {metadata.version}\ntopic_id: {metadata.topic_id}".encode()


def decode_partition_metadata(data: bytes, path: str | None = None) -> PartitionMetadata:
    """Parse the file by Kafka's rules; raises CorruptDataError naming the line and its byte position."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(
            "partition metadata is not valid UTF-8", path=path, position=exc.start
        ) from exc
    lines = _LINE_END.split(text)
    version_line = lines[0]
    fields = _SEPARATOR.split(version_line)
    if len(fields) != 2 or fields[0] != "version" or not fields[1].isascii() or not fields[1].isdigit():
        raise CorruptDataError(
            f"line 1: expected 'version: <n>', got {version_line[:_MAX_SHOWN_CHARS]!r}", path=path, position=0
        )
    version = int(fields[1])
    if version != PARTITION_METADATA_VERSION:
        raise CorruptDataError(
            f"partition metadata version {version} is not supported; only version "
            f"{PARTITION_METADATA_VERSION} is",
            path=path,
            position=0,
        )
    position = _second_line_position(data)
    id_line = lines[1] if len(lines) > 1 else ""
    fields = _SEPARATOR.split(id_line)
    if len(fields) != 2 or fields[0] != "topic_id":
        raise CorruptDataError(
            f"line 2: expected 'topic_id: <base64 id>', got {id_line[:_MAX_SHOWN_CHARS]!r}",
            path=path,
            position=position,
        )
    try:
        decode_topic_id(fields[1])
    except ValueError as exc:
        raise CorruptDataError(f"line 2: {exc}", path=path, position=position) from exc
    return PartitionMetadata(version, fields[1])


def _second_line_position(data: bytes) -> int:
    match = re.search(rb"\r\n|\r|\n", data)
    return len(data) if match is None else match.end()


def read_partition_metadata(directory: Path) -> PartitionMetadata | None:
    """The metadata of a partition dir, or None when it has no ``partition.metadata`` file."""
    path = os.path.join(directory, PARTITION_METADATA_FILE)
    try:
        data = read_whole_file(path)  # a bare descriptor: read for every partition by explain
    except FileNotFoundError:
        return None
    return decode_partition_metadata(data, path=path)


def write_partition_metadata(directory: Path, topic_id: str) -> PartitionMetadata:
    metadata = PartitionMetadata(PARTITION_METADATA_VERSION, topic_id)
    write_atomically(directory / PARTITION_METADATA_FILE, encode_partition_metadata(metadata))
    return metadata

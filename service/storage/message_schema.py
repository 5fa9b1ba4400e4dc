"""Kafka's generated-message wire format, driven by a schema table: what ``*.json`` message specs mean.

Kafka describes the records its coordinators write (``OffsetCommitValue.json``, ``TransactionLogValue.json``
…) as versioned field lists, and its message generator turns them into readers and writers. This module
is that rule set, as a specification; the schemas themselves are tables in ``coordinator_records``.

A message version is either *classic* or *flexible* (``flexibleVersions``). Field encodings, big-endian::

    type       classic                                   flexible
    int8..64   1, 2, 4, 8 bytes, signed                  the same
    uint16     2 bytes, unsigned                         the same
    float64    8 bytes, IEEE 754 double                  the same
    bool       1 byte, 0 or 1                            the same
    uuid       16 bytes (Kafka ``Uuid``)                 the same
    string     int16 length (-1: null) + UTF-8           uvarint length+1 (0: null) + UTF-8
    bytes      int32 length (-1: null) + bytes           uvarint length+1 (0: null) + bytes
    [] of T    int32 count (-1: null) + elements         uvarint count+1 (0: null) + elements
    struct     its fields in order                       its fields, then its tagged fields

Tagged fields (flexible versions only, ``taggedVersions``) follow a struct's regular fields: a uvarint
count, then per field a uvarint tag, a uvarint size and the field's bytes, in ascending tag order. A
tagged field that is absent takes its default; a tag the schema does not know is kept as raw bytes
(``unknown_tagged_fields``), as Kafka keeps it. Decoded messages are dicts keyed by the snake_case field
names; ``bytes`` fields decode to ``bytes``, ``uuid`` fields to Kafka's ``Uuid.toString`` form (URL-safe
base64 without padding, as ``partition.metadata`` holds a topic id).
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Mapping
from dataclasses import dataclass

from service.base.errors import CorruptDataError

__all__ = [
    "UNKNOWN_TAGS",
    "Field",
    "Schema",
    "decode_message",
    "decode_uvarint",
    "encode_message",
    "encode_uvarint",
]

UNKNOWN_TAGS = "unknown_tagged_fields"  # where tags the schema does not know are kept: [{"tag", "data"}]
_INTS: dict[str, struct.Struct] = {
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
}
_FLOAT64 = struct.Struct(">d")
_LENGTH16 = _INTS["int16"]
_LENGTH32 = _INTS["int32"]
_MAX_UVARINT_BYTES = 5  # an unsigned varint of a 32-bit value
_UUID_BYTES = 16


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a schema, as the JSON spec declares it.

    ``type`` is ``int8``/``int16``/``uint16``/``int32``/``int64``/``float64``/``bool``/``uuid``/``string``/
    ``bytes``, or ``struct`` with ``fields``; ``is_array`` makes it ``[]type``. ``first_version``/
    ``last_version`` bound the versions that carry it (``last_version`` None: every later one);
    ``nullable_from`` is the first version where it may be null. A field with a ``tag`` is tagged in those
    versions (``taggedVersions``) and takes ``default`` when absent (a list default, ``[]``, is copied per
    message); an untagged field missing from a version also reads as ``default``.
    """

    name: str
    type: str
    first_version: int = 0
    last_version: int | None = None
    is_array: bool = False
    nullable_from: int | None = None
    tag: int | None = None
    default: object = None
    fields: tuple[Field, ...] = ()

    def in_version(self, version: int) -> bool:
        return self.first_version <= version and (self.last_version is None or version <= self.last_version)

    def is_nullable(self, version: int) -> bool:
        return self.nullable_from is not None and version >= self.nullable_from


@dataclass(frozen=True, slots=True)
class Schema:
    """A message: its name, the versions Kafka defines (inclusive) and the first flexible one."""

    name: str
    first_version: int
    last_version: int
    flexible_from: int | None
    fields: tuple[Field, ...]

    def has_version(self, version: int) -> bool:
        return self.first_version <= version <= self.last_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


# -- unsigned varints ----------------------------------------------------------------------------------


def encode_uvarint(value: int) -> bytes:
    """Kafka's unsigned varint (7 bits a byte, low group first) of a value in [0, 2**32)."""
    if not 0 <= value < 1 << 32:
        raise ValueError(f"an unsigned varint holds 0 .. 2**32-1, got {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``data[pos]`` and the position after it."""
    value = 0
    for i in range(_MAX_UVARINT_BYTES):
        if pos + i >= len(data):
            raise CorruptDataError("unsigned varint runs past the end", position=pos)
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, pos + i + 1
    raise CorruptDataError(f"unsigned varint longer than {_MAX_UVARINT_BYTES} bytes", position=pos)


# -- decoding ------------------------------------------------------------------------------------------


class _Reader:
    """A cursor over a message's bytes; every short read is a CorruptDataError at its position."""

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def take(self, size: int, what: str) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise CorruptDataError(
                f"{what} needs {size} bytes, {len(self.data) - self.pos} are left", position=self.pos
            )
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def integer(self, kind: str, what: str) -> int:
        codec = _INTS[kind]
        value: int = codec.unpack(self.take(codec.size, what))[0]
        return value

    def uvarint(self) -> int:
        value, self.pos = decode_uvarint(self.data, self.pos)
        return value

    def length(self, flexible: bool, wide: bool, what: str) -> int:
        """A length or count: -1 means null."""
        if flexible:
            return self.uvarint() - 1
        return self.integer("int32" if wide else "int16", what)


def decode_message(schema: Schema, version: int, data: bytes, pos: int = 0) -> tuple[dict[str, object], int]:
    """The fields of ``schema`` at ``version`` read from ``data[pos:]``; return them and the end position.

    Raises CorruptDataError (position relative to ``data``) on bytes that do not fit the schema, and
    ValueError for a version the schema does not define.
    """
    if not schema.has_version(version):
        raise ValueError(
            f"{schema.name} has versions {schema.first_version}-{schema.last_version}, not {version}"
        )
    reader = _Reader(data, pos)
    message = _read_struct(reader, schema.fields, version, schema.is_flexible(version))
    return message, reader.pos


def _read_struct(
    reader: _Reader, fields: tuple[Field, ...], version: int, flexible: bool
) -> dict[str, object]:
    out: dict[str, object] = {}
    tagged: dict[int, Field] = {}
    for field in fields:
        if not field.in_version(version):
            continue
        if field.tag is not None:
            tagged[field.tag] = field
            out[field.name] = list(field.default) if isinstance(field.default, list) else field.default
        else:
            out[field.name] = _read_field(reader, field, version, flexible)
    if flexible:
        _read_tagged(reader, tagged, version, out)
    return out


def _read_tagged(reader: _Reader, tagged: dict[int, Field], version: int, out: dict[str, object]) -> None:
    unknown: list[dict[str, object]] = []
    for _ in range(reader.uvarint()):
        tag = reader.uvarint()
        size = reader.uvarint()
        start = reader.pos
        raw = reader.take(size, f"tagged field {tag}")
        field = tagged.get(tag)
        if field is None:
            unknown.append({"tag": tag, "data": raw})
            continue
        inner = _Reader(reader.data[: start + size], start)  # positions stay the message's
        out[field.name] = _read_field(inner, field, version, flexible=True)
        if inner.pos != start + size:
            raise CorruptDataError(
                f"tagged field {field.name} has {start + size - inner.pos} bytes left over",
                position=inner.pos,
            )
    if unknown:
        out[UNKNOWN_TAGS] = unknown


def _read_field(reader: _Reader, field: Field, version: int, flexible: bool) -> object:
    if not field.is_array:
        return _read_value(reader, field, version, flexible)
    count = reader.length(flexible, wide=True, what=f"{field.name} count")
    if count < 0:
        return _null(field, version, reader.pos)
    return [_read_value(reader, field, version, flexible) for _ in range(count)]


def _read_value(reader: _Reader, field: Field, version: int, flexible: bool) -> object:
    if field.type in _INTS:
        return reader.integer(field.type, field.name)
    if field.type == "float64":
        value: float = _FLOAT64.unpack(reader.take(_FLOAT64.size, field.name))[0]
        return value
    if field.type == "bool":
        return reader.take(1, field.name) != b"\x00"
    if field.type == "uuid":
        return base64.urlsafe_b64encode(reader.take(_UUID_BYTES, field.name)).decode("ascii").rstrip("=")
    if field.type == "struct":
        return _read_struct(reader, field.fields, version, flexible)
    wide = field.type == "bytes"
    size = reader.length(flexible, wide, f"{field.name} length")
    if size < 0:
        return _null(field, version, reader.pos)
    raw = reader.take(size, field.name)
    if wide:
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptDataError(f"{field.name} is not UTF-8", position=reader.pos - size) from exc


def _null(field: Field, version: int, position: int) -> object:
    """None, where the version lets the field be null."""
    if not field.is_nullable(version):
        raise CorruptDataError(
            f"{field.name} is null, which version {version} does not allow", position=position
        )
    return None


# -- encoding ------------------------------------------------------------------------------------------


def encode_message(schema: Schema, version: int, values: Mapping[str, object]) -> bytes:
    """``values`` (snake_case names; a missing field takes its default) as ``schema`` at ``version``."""
    if not schema.has_version(version):
        raise ValueError(
            f"{schema.name} has versions {schema.first_version}-{schema.last_version}, not {version}"
        )
    out = bytearray()
    _write_struct(out, schema.fields, version, schema.is_flexible(version), values)
    return bytes(out)


def _write_struct(
    out: bytearray, fields: tuple[Field, ...], version: int, flexible: bool, values: Mapping[str, object]
) -> None:
    tagged: list[tuple[int, bytes]] = []
    for field in fields:
        if not field.in_version(version):
            continue
        value = values.get(field.name, field.default)
        if field.tag is None:
            _write_field(out, field, version, flexible, value)
        elif value != field.default:
            tagged_bytes = bytearray()
            _write_field(tagged_bytes, field, version, True, value)
            tagged.append((field.tag, bytes(tagged_bytes)))
    if flexible:
        out += encode_uvarint(len(tagged))
        for tag, raw in sorted(tagged):
            out += encode_uvarint(tag) + encode_uvarint(len(raw)) + raw


def _write_field(out: bytearray, field: Field, version: int, flexible: bool, value: object) -> None:
    if not field.is_array:
        _write_value(out, field, version, flexible, value)
        return
    if value is None:
        _require_nullable(field, version)
        _write_length(out, -1, flexible, wide=True)
        return
    if not isinstance(value, list):
        raise ValueError(f"{field.name} is an array, got {value!r}")
    _write_length(out, len(value), flexible, wide=True)
    for element in value:
        _write_value(out, field, version, flexible, element)


def _write_value(out: bytearray, field: Field, version: int, flexible: bool, value: object) -> None:
    if field.type in _INTS:
        if not isinstance(value, int):
            raise ValueError(f"{field.name} is an {field.type}, got {value!r}")
        out += _INTS[field.type].pack(value)
    elif field.type == "float64":
        if not isinstance(value, float):
            raise ValueError(f"{field.name} is a float64, got {value!r}")
        out += _FLOAT64.pack(value)
    elif field.type == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{field.name} is a bool, got {value!r}")
        out += b"\x01" if value else b"\x00"
    elif field.type == "uuid":
        out += _uuid_bytes(field.name, value)
    elif field.type == "struct":
        if not isinstance(value, Mapping):
            raise ValueError(f"{field.name} is a struct, got {value!r}")
        _write_struct(out, field.fields, version, flexible, value)
    elif value is None:
        _require_nullable(field, version)
        _write_length(out, -1, flexible, wide=field.type == "bytes")
    else:
        raw = value.encode("utf-8") if isinstance(value, str) else value
        if not isinstance(raw, bytes):
            raise ValueError(f"{field.name} is a {field.type}, got {value!r}")
        _write_length(out, len(raw), flexible, wide=field.type == "bytes")
        out += raw


def _require_nullable(field: Field, version: int) -> None:
    """A null where the version does not let the field be null would be refused by every reader."""
    if not field.is_nullable(version):
        raise ValueError(f"{field.name} cannot be null in version {version}")


def _write_length(out: bytearray, length: int, flexible: bool, *, wide: bool) -> None:
    if flexible:
        out += encode_uvarint(length + 1)
    else:
        out += (_LENGTH32 if wide else _LENGTH16).pack(length)


def _uuid_bytes(name: str, value: object) -> bytes:
    """A ``uuid`` field's 16 bytes from Kafka's string form (or the bytes themselves)."""
    if isinstance(value, bytes):
        raw = value
    elif isinstance(value, str):
        try:
            raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"{name} is a uuid, got {value!r}") from exc
    else:
        raise ValueError(f"{name} is a uuid, got {value!r}")
    if len(raw) != _UUID_BYTES:
        raise ValueError(f"{name} is a uuid of {_UUID_BYTES} bytes, got {len(raw)}")
    return raw

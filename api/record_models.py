"""Record JSON as Kafka's REST proxy v3 writes it: ``{"type": "STRING"|"BINARY"|"JSON", "data": …}``.

Validation also converts: after it, every key, value and header value of a :class:`RecordIn` is the
bytes to store, so a bad record (invalid base64, text that is not UTF-8, a NaN in JSON) is a 422 naming
its field before anything is appended. Fetched records always come back as BINARY (base64).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema

from service.storage.log_config import LONG_MAX

__all__ = [
    "BinaryDataOut",
    "FetchResponse",
    "HeaderIn",
    "HeaderOut",
    "ProduceRequest",
    "ProduceResponse",
    "RecordData",
    "RecordIn",
    "RecordOut",
]

_FORBID = ConfigDict(extra="forbid", frozen=True)


def _base64_bytes(value: object) -> bytes:
    if not isinstance(value, str):
        raise ValueError("BINARY data must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not valid base64: {exc}") from exc


def _utf8_bytes(value: object) -> bytes:
    if not isinstance(value, str):
        raise ValueError("STRING data must be a string")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"not encodable as UTF-8: {exc.reason}") from exc


def _json_bytes(value: object) -> bytes:
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not serializable as JSON: {exc}") from exc


def _utf8_text(value: str) -> str:
    _utf8_bytes(value)
    return value


Base64Bytes = Annotated[
    bytes,
    PlainValidator(_base64_bytes),
    WithJsonSchema({"type": "string", "contentEncoding": "base64"}),
]
Utf8Bytes = Annotated[bytes, PlainValidator(_utf8_bytes), WithJsonSchema({"type": "string"})]
JsonBytes = Annotated[bytes, PlainValidator(_json_bytes), WithJsonSchema({"description": "any JSON value"})]


class StringData(BaseModel):
    model_config = _FORBID
    type: Literal["STRING"]
    data: Utf8Bytes


class BinaryData(BaseModel):
    model_config = _FORBID
    type: Literal["BINARY"]
    data: Base64Bytes


class JsonData(BaseModel):
    model_config = _FORBID
    type: Literal["JSON"]
    data: JsonBytes


RecordData = Annotated[StringData | BinaryData | JsonData, Field(discriminator="type")]
"""Key, value or header value; ``.data`` holds the bytes once validated."""


class HeaderIn(BaseModel):
    model_config = _FORBID
    key: Annotated[str, AfterValidator(_utf8_text)]
    value: RecordData | None = None


class RecordIn(BaseModel):
    """One record to append. A null (or absent) value is a tombstone; no timestamp means now."""

    model_config = _FORBID
    key: RecordData | None = None
    value: RecordData | None = None
    timestamp: int | None = Field(default=None, ge=0, le=LONG_MAX, strict=True, description="CreateTime, ms")
    headers: list[HeaderIn] = Field(default_factory=list)


class ProduceRequest(BaseModel):
    model_config = _FORBID
    records: list[RecordIn] = Field(min_length=1)


class ProduceResponse(BaseModel):
    topic: str
    partition: int
    base_offset: int
    last_offset: int
    offsets: list[int] = Field(description="Each record's offset, in request order")
    log_append_time: int | None = Field(description="The broker's time with LogAppendTime, else null")


class BinaryDataOut(BaseModel):
    type: Literal["BINARY"]
    data: str = Field(description="base64")


class HeaderOut(BaseModel):
    key: str
    value: BinaryDataOut | None


class RecordOut(BaseModel):
    offset: int
    timestamp: int
    key: BinaryDataOut | None
    value: BinaryDataOut | None = Field(description="null: a tombstone")
    headers: list[HeaderOut]


class FetchResponse(BaseModel):
    topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    next_offset: int = Field(description="Where the next fetch should start")
    records: list[RecordOut]

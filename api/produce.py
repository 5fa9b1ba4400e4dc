"""Produce over HTTP: validate a whole request, encode it as a producer would, append it all or nothing.

The body is parsed once: the common shape (STRING/BINARY data) by ``json.loads`` on the fast path
(``api.fast_records``); anything else, invalid requests included, by pydantic's JSON parser against a
request model whose ``records`` list is capped at ``api.max.records.per.request``, which names what is
wrong. Either way every record is converted to bytes first, so an invalid record rejects the request
before the log is touched. The records go into as many v2 batches as ``max.message.bytes`` needs
(Kafka's producer splits the same way), and ``PartitionRecords.append_batches`` validates all of them before
it writes any.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field, ValidationError, create_model
from pydantic_core import ErrorDetails

from api.fast_records import fast_records
from api.problems import ApiProblem, FieldError, validation_problem
from api.record_models import ProduceRequest, ProduceResponse, RecordData, RecordIn
from service.base.errors import InvalidInputError
from service.core.ports import PartitionRecords
from service.storage.records import NO_TIMESTAMP, RECORD_BATCH_OVERHEAD, Header, Record, encode_batch

__all__ = [
    "append_request",
    "estimated_record_bytes",
    "model_records",
    "produce_request_model",
    "to_producer_batches",
]

# The most a record's framing can take: length, attributes, timestamp and offset deltas, key and value
# lengths, header count (varints at their widest); a header adds its two lengths.
_RECORD_FRAMING_BYTES = 5 + 1 + 10 + 5 + 5 + 5 + 5
_HEADER_FRAMING_BYTES = 10


def produce_request_model(max_records: int) -> type[ProduceRequest]:
    """``ProduceRequest`` with ``records`` capped at ``max_records`` (``api.max.records.per.request``)."""
    return create_model(
        "ProduceRequest",
        __base__=ProduceRequest,
        __doc__=f"Records to append, at most {max_records} (api.max.records.per.request).",
        records=(list[RecordIn], Field(min_length=1, max_length=max_records)),
    )


def append_request(
    log: PartitionRecords, body: bytes, model: type[ProduceRequest], *, max_records: int, now_ms: int
) -> ProduceResponse:
    """Validate ``body``, convert and append its records; 422 (``ApiProblem``) if any record is bad."""
    records = fast_records(body, max_records=max_records, now_ms=now_ms)
    if records is None:  # not the common shape, or invalid: the model decides and names the problem
        records = model_records(body, model, now_ms=now_ms)
    data = b"".join(to_producer_batches(records, log.config.max_message_bytes))
    try:
        info = log.append_batches(data)  # validates every batch before it writes any
    except InvalidInputError as exc:  # the log's rules: keys when compacted, timestamps, sizes
        raise ApiProblem(
            422, f"records: {exc}", errors=[FieldError(field="records", message=str(exc))]
        ) from exc
    tp = log.topic_partition
    return ProduceResponse(
        topic=tp.topic,
        partition=tp.partition,
        base_offset=info.first_offset,
        last_offset=info.last_offset,
        offsets=list(info.record_offsets),
        log_append_time=info.log_append_time_ms if info.log_append_time_ms != NO_TIMESTAMP else None,
    )


def model_records(body: bytes, model: type[ProduceRequest], *, now_ms: int) -> list[Record]:
    """The records of ``body`` as validated by ``model``, numbered 0, 1, …; 422 naming what is wrong."""
    try:
        request = model.model_validate_json(body)
    except ValidationError as exc:
        raise validation_problem([_name_the_limit(e) for e in exc.errors(include_input=False)]) from exc
    return [_to_record(r, i, now_ms) for i, r in enumerate(request.records)]


def _name_the_limit(error: ErrorDetails) -> ErrorDetails:
    """Too many records: say which key sets the limit."""
    ctx = error.get("ctx") or {}
    if error["type"] == "too_long" and tuple(error["loc"]) == ("records",) and "max_length" in ctx:
        limit = ctx["max_length"]
        message = f"more than {limit} records in one request (api.max.records.per.request={limit})"
        return {**error, "msg": message}
    return error


def _data(value: RecordData | None) -> bytes | None:
    return None if value is None else value.data


def _to_record(record: RecordIn, index: int, now_ms: int) -> Record:
    headers = tuple(Header(h.key, _data(h.value)) for h in record.headers)
    timestamp = now_ms if record.timestamp is None else record.timestamp
    return Record(index, timestamp, _data(record.key), _data(record.value), headers)


def estimated_record_bytes(record: Record) -> int:
    """An upper bound of the record's encoded size inside a batch."""
    size = _RECORD_FRAMING_BYTES + len(record.key or b"") + len(record.value or b"")
    for header in record.headers:
        size += _HEADER_FRAMING_BYTES + len(header.key.encode("utf-8")) + len(header.value or b"")
    return size


def to_producer_batches(records: Sequence[Record], max_batch_bytes: int) -> list[bytes]:
    """Uncompressed v2 batches no larger than ``max_batch_bytes`` by estimate, as a producer sends them.

    ``records`` are numbered by their index (offset 0, 1, …); each batch's base offset is its first
    record's, so offsets are contiguous inside each batch (the log assigns the real ones). A record too
    large on its own gets a batch of its own, and the log's validation decides.
    """
    batches: list[bytes] = []
    start = 0
    current_bytes = RECORD_BATCH_OVERHEAD
    for i, record in enumerate(records):
        size = estimated_record_bytes(record)
        if i > start and current_bytes + size > max_batch_bytes:
            batches.append(encode_batch(records[start:i], base_offset=start))
            start, current_bytes = i, RECORD_BATCH_OVERHEAD
        current_bytes += size
    if start < len(records):
        batches.append(encode_batch(records[start:], base_offset=start))
    return batches

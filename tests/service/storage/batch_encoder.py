"""One record batch from a JSON description, for the test that holds the pure-Python path to the C path.

Which path runs is chosen at import (``LOGCLEANER_PURE_PYTHON``), so the test encodes each description in
its own process (the C path) and in this module run as ``python -m tests.service.storage.batch_encoder``
with ``LOGCLEANER_PURE_PYTHON=1``. Its first line on stdout says which path it took (``{"pure": bool}``);
then, for each description read as one JSON line on stdin, one line: the batch's bytes in hex.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from service.storage import compression, records
from service.storage.compression import CompressionType
from service.storage.records import Header, Record, TimestampType, encode_batch

BatchSpec = dict[str, Any]  # JSON: {"compression", "timestamp_type", "producer": [...], "records": [...]}


def _unhex(data: str | None) -> bytes | None:
    return None if data is None else bytes.fromhex(data)


def encode_spec(spec: BatchSpec) -> bytes:
    """The batch ``spec`` describes: records ``[offset, timestamp, key hex|null, value hex|null, [[header
    key, value hex|null], ...]]`` and the batch's codec, timestamp type and producer fields."""
    batch_records = [
        Record(offset, timestamp, _unhex(key), _unhex(value), tuple(Header(k, _unhex(v)) for k, v in headers))
        for offset, timestamp, key, value, headers in spec["records"]
    ]
    producer_id, producer_epoch, base_sequence, is_transactional = spec["producer"]
    return encode_batch(
        batch_records,
        compression=CompressionType(spec["compression"]),
        timestamp_type=TimestampType(spec["timestamp_type"]),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
    )


def is_pure_python() -> bool:
    """True when neither the codecs' nor the records' C module is in use."""
    return compression._codecs is None and records._speedups is None


def main() -> None:
    sys.stdout.write(json.dumps({"pure": is_pure_python()}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        sys.stdout.write(encode_spec(json.loads(line)).hex() + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()

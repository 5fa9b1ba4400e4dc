"""Per-segment key statistics for estimating what compaction would free, without the records at hand.

A :class:`SegmentSketch` holds a sealed segment's record, batch and byte counts and a HyperLogLog sketch
of its keys (Flajolet et al. 2007, with linear counting for small cardinalities): 2**12 one-byte
registers, a standard error of 1.04/64 ≈ 1.6%; up to 1024 distinct keys it keeps their hashes instead
(exact, and cheap to merge). Sketches of a log's segments merge (register-wise maximum)
into the distinct-key count of any run of them. Keys are hashed with 64-bit BLAKE2b, so sketches made in
different processes merge.

:func:`estimate_freed_bytes` models a round over a run of segments: each of the ``n`` records survives
with probability ``d / n`` (``d`` distinct keys: the latest record of each key survives); a batch of ``m``
records survives if any of its records does, keeping its header (:data:`BATCH_OVERHEAD_BYTES`). Exact at one
record per batch; the estimate ignores tombstones past their delete horizon and aborted transactions.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from hashlib import blake2b

from service.storage.segment import LogSegment

__all__ = [
    "BATCH_OVERHEAD_BYTES",
    "KeySketch",
    "SegmentSketch",
    "decode_sketch",
    "encode_sketch",
    "estimate_freed_bytes",
    "sketch_segment",
]

BATCH_OVERHEAD_BYTES = 61  # a v2 batch's header (Kafka RECORD_BATCH_OVERHEAD)
_P = 12
_M = 1 << _P
_VALUE_BITS = 64 - _P
_ALPHA = 0.7213 / (1 + 1.079 / _M)


_SPARSE_MAX = 1024  # distinct keys kept as exact hashes before the sketch turns into registers


def _key_hash(key: bytes) -> int:
    return int.from_bytes(blake2b(key, digest_size=8).digest(), "big")


@dataclass(slots=True)
class KeySketch:
    """A HyperLogLog sketch of keys, sparse while small: up to :data:`_SPARSE_MAX` distinct keys it keeps
    their 64-bit hashes (exact, and cheap to merge for the many small segments of a broker), then the
    registers. Owned by one thread while it is filled; merged copies are new."""

    hashes: set[int] | None = field(default_factory=set)
    registers: bytearray | None = None

    def add(self, key: bytes) -> None:
        self._add_hash(_key_hash(key))

    def _add_hash(self, h: int) -> None:
        if self.hashes is not None:
            self.hashes.add(h)
            if len(self.hashes) > _SPARSE_MAX:
                self._densify()
            return
        registers = self.registers
        if registers is None:
            raise ValueError("a key sketch has neither hashes nor registers")
        index = h >> _VALUE_BITS
        rank = _VALUE_BITS - (h & ((1 << _VALUE_BITS) - 1)).bit_length() + 1
        if rank > registers[index]:
            registers[index] = rank

    def _densify(self) -> None:
        hashes, self.hashes, self.registers = self.hashes or set(), None, bytearray(_M)
        for h in hashes:
            self._add_hash(h)

    def merged(self, others: Iterable[KeySketch]) -> KeySketch:
        out = KeySketch(set(self.hashes) if self.hashes is not None else None, self._copied_registers())
        for other in others:
            if other.hashes is not None:
                for h in other.hashes:
                    out._add_hash(h)
                continue
            if out.hashes is not None:
                out._densify()
            if out.registers is not None and other.registers is not None:
                out.registers = bytearray(map(max, out.registers, other.registers))
        return out

    def _copied_registers(self) -> bytearray | None:
        return bytearray(self.registers) if self.registers is not None else None

    def cardinality(self) -> float:
        if self.hashes is not None:
            return float(len(self.hashes))
        registers = self.registers or bytearray(_M)
        total = math.fsum(2.0**-r for r in registers)
        estimate = _ALPHA * _M * _M / total
        zeros = registers.count(0)
        if estimate <= 2.5 * _M and zeros:
            return _M * math.log(_M / zeros)  # linear counting: exact-ish where registers are still empty
        return estimate


@dataclass(frozen=True, slots=True)
class SegmentSketch:
    """One sealed segment's counts and key sketch (``records`` counts keyed data records only)."""

    size_bytes: int
    batches: int
    records: int
    keys: KeySketch


def sketch_segment(segment: LogSegment) -> SegmentSketch:
    """Read ``segment`` once: every batch, every keyed record's key (control batches count as batches)."""
    keys = KeySketch()
    batches = records = 0
    for batch in segment.batches():
        batches += 1
        if batch.is_control:
            continue
        for record in batch.records():
            if record.key is not None:
                keys.add(record.key)
                records += 1
    return SegmentSketch(segment.size_bytes, batches, records, keys)


def estimate_freed_bytes(sketches: Iterable[SegmentSketch]) -> int:
    """What a round over the segments these sketch would free (the module's model)."""
    parts = list(sketches)
    size = sum(s.size_bytes for s in parts)
    batches = sum(s.batches for s in parts)
    records = sum(s.records for s in parts)
    if not parts or records == 0:
        return 0
    distinct = min(parts[0].keys.merged(s.keys for s in parts[1:]).cardinality(), float(records))
    survive = distinct / records
    per_batch = records / batches
    record_bytes = max(size - batches * BATCH_OVERHEAD_BYTES, 0) / records
    surviving_batches = batches * (1.0 - math.pow(1.0 - survive, per_batch))
    remaining = distinct * record_bytes + surviving_batches * BATCH_OVERHEAD_BYTES
    return max(round(size - remaining), 0)


def encode_sketch(sketch: SegmentSketch) -> dict[str, object]:
    """A sketch as JSON-ready values: the counts, and the hashes or the registers (base64)."""
    doc: dict[str, object] = {"size": sketch.size_bytes, "batches": sketch.batches, "records": sketch.records}
    keys = sketch.keys
    if keys.hashes is not None:
        doc["hashes"] = sorted(keys.hashes)
    else:
        doc["registers"] = base64.b64encode(bytes(keys.registers or b"")).decode()
    return doc


def decode_sketch(doc: object) -> SegmentSketch:
    """:func:`encode_sketch`'s inverse; anything else raises ``ValueError`` naming what is wrong."""
    if not isinstance(doc, dict):
        raise ValueError(f"a segment sketch is an object, not {type(doc).__name__}")
    counts = [doc.get(name) for name in ("size", "batches", "records")]
    if not all(isinstance(c, int) and c >= 0 for c in counts):
        raise ValueError(f"a segment sketch's size, batches and records are counts: {counts}")
    hashes, registers = doc.get("hashes"), doc.get("registers")
    if isinstance(hashes, list) and all(isinstance(h, int) and 0 <= h < 1 << 64 for h in hashes):
        keys = KeySketch(set(hashes))
    elif isinstance(registers, str) and len(raw := base64.b64decode(registers, validate=True)) == _M:
        keys = KeySketch(None, bytearray(raw))
    else:
        raise ValueError("a segment sketch has neither valid hashes nor 4096 registers")
    size, batches, records = (int(str(c)) for c in counts)
    return SegmentSketch(size, batches, records, keys)

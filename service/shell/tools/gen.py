"""``logcleaner gen``: a synthetic workload written through the storage layer, for demos and benchmarks.

Every batch goes through ``PartitionLog.append_batches``, so it is validated, gets its offsets, rolls
segments and fills the indexes exactly as a producer's batch would; the directory is then closed the way
the log manager closes it (checkpoints and the clean-shutdown marker), so every other command and Kafka
itself can read it. Generation is reproducible: ``seed``, topic and partition seed each partition's
random stream, and values are slices of one seeded random pool (so they do not compress).

Speed matters because the benchmarks build 1 GiB partitions with it: the records area of a batch is
encoded here with precomputed varints (about 7x faster than encoding ``Record`` tuples one by one); the
storage layer still decodes and checks every record on append, and the tests check the bytes against
``records.decode_records``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from service.base.clock import Clock
from service.base.errors import InvalidInputError
from service.shell.tools.workload_dir import GenResult, is_chosen, write_workload
from service.storage.compression import CompressionType, compress
from service.storage.control import encode_end_txn_marker_batch
from service.storage.log import PartitionLog
from service.storage.log_config import LogConfig
from service.storage.log_files import is_valid_topic_name
from service.storage.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, Record, encode_batch
from service.storage.topic_partition import TopicPartition
from service.storage.varint import encode_varint

__all__ = [
    "CLEANUP_POLICIES",
    "DEFAULT_FUTURE_MS",
    "MIN_SEGMENT_BYTES",
    "GenOptions",
    "GenResult",
    "IDEMPOTENT_PRODUCER_ID",
    "TRANSACTIONAL_PRODUCER_ID",
    "encode_records_area",
    "generate",
]

logger = logging.getLogger(__name__)

IDEMPOTENT_PRODUCER_ID = 1  # ``--idempotent``'s producer: one producer writing every partition
TRANSACTIONAL_PRODUCER_ID = 2  # ``--transaction-batches``' producer, another one, so the two runs can mix
DEFAULT_FUTURE_MS = 86_400_000  # one day: the size of the future-timestamp incident we reproduce
MIN_SEGMENT_BYTES = 14  # Kafka 3.x's minimum segment.bytes
MAX_SEGMENT_BYTES = (1 << 31) - 1  # segment.bytes is a Java int
CLEANUP_POLICIES: dict[str, frozenset[str]] = {
    "delete": frozenset({"delete"}),
    "compact": frozenset({"compact"}),
    "compact,delete": frozenset({"compact", "delete"}),
    "delete,compact": frozenset({"compact", "delete"}),
}
_DEFAULT_CONFIG = LogConfig()
_VALUE_POOL_BYTES = 1 << 20
_VARINT_CACHE = tuple(encode_varint(n) for n in range(1 << 14))  # zig-zag varints of 0 .. 16383
_NULL = b"\x01"  # the varint -1: a null key or value


@dataclass(frozen=True, slots=True)
class GenOptions:
    """What to generate; checked on construction, so library callers get the CLI's rules.

    ``keys=None`` means one key per record (key cardinality = ``records``); ``timestamp_start_ms=None``
    means now minus ``timestamp_spread_ms``, so the newest generated record is stamped now. ``idempotent``
    batches carry producer id ``IDEMPOTENT_PRODUCER_ID``, epoch 0 and sequences from 0 in each partition
    (from the producer's last one there when appending). ``transaction_batches=N`` (N > 0) writes as a
    transactional producer instead (``TRANSACTIONAL_PRODUCER_ID``, epoch 0, sequences as above): every N
    batches of a partition, and after its last, a transaction ends with a COMMIT marker, or an ABORT for
    ``aborted_share`` of them.
    """

    log_dir: Path
    topics: tuple[str, ...] = ("gen-0",)
    partitions: int = 1
    records: int = 10_000
    batch_size: int = 500
    keys: int | None = None
    value_size: int = 100
    tombstones: float = 0.0
    timestamp_start_ms: int | None = None
    timestamp_spread_ms: int = 0
    future_share: float = 0.0
    future_ms: int = DEFAULT_FUTURE_MS
    compression: CompressionType = CompressionType.NONE
    segment_bytes: int = _DEFAULT_CONFIG.segment_bytes
    cleanup_policy: frozenset[str] = field(default_factory=lambda: frozenset({"delete"}))
    seed: int = 0
    idempotent: bool = False  # batches as an idempotent producer writes them (Kafka's default since 3.0)
    transaction_batches: int = 0  # batches per transaction; 0: not transactional
    aborted_share: float = 0.0  # of the transactions, the share that is aborted
    metadata_log: bool = False  # the topics and their configs go into a KRaft metadata log (gen_metadata)

    @property
    def producer_id(self) -> int:
        """The producer id of the generated batches (``NO_PRODUCER_ID`` when neither idempotent nor
        transactional)."""
        if self.transaction_batches:
            return TRANSACTIONAL_PRODUCER_ID
        return IDEMPOTENT_PRODUCER_ID if self.idempotent else NO_PRODUCER_ID

    def __post_init__(self) -> None:
        _check_options(self)

    @property
    def key_count(self) -> int:
        return self.records if self.keys is None else self.keys

    def log_config(self) -> LogConfig:
        """The generated topics' config: timestamps unbounded, so future and old timestamps are accepted."""
        return LogConfig(
            segment_bytes=self.segment_bytes,
            cleanup_policy=self.cleanup_policy,
            message_timestamp_before_max_ms=_DEFAULT_CONFIG.message_timestamp_before_max_ms,
            message_timestamp_after_max_ms=_DEFAULT_CONFIG.message_timestamp_after_max_ms,
        )

    def topic_overrides(self) -> dict[str, str]:
        """The topic configs the run was asked for that differ from Kafka's defaults, under Kafka's names.

        ``generate`` stores them as the topics' overrides, so ``serve``, ``explain``, ``retention`` and
        ``clean`` treat the logs as written (a compacted workload is compacted), as ``kafka-topics.sh
        --create --config`` would have recorded them.
        """
        overrides: dict[str, str] = {}
        if self.cleanup_policy != _DEFAULT_CONFIG.cleanup_policy:
            overrides["cleanup.policy"] = ",".join(sorted(self.cleanup_policy))
        if self.segment_bytes != _DEFAULT_CONFIG.segment_bytes:
            overrides["segment.bytes"] = str(self.segment_bytes)
        return overrides


def _check_options(options: GenOptions) -> None:
    """Raise InvalidInputError naming the first option outside its range."""
    counts = {
        "partitions": (options.partitions, 1),
        "records": (options.records, 0),
        "batch_size": (options.batch_size, 1),
        "keys": (options.key_count, 1 if options.records else 0),
        "value_size": (options.value_size, 0),
        "timestamp_spread_ms": (options.timestamp_spread_ms, 0),
        "future_ms": (options.future_ms, 0),
        "timestamp_start_ms": (0 if options.timestamp_start_ms is None else options.timestamp_start_ms, 0),
        "transaction_batches": (options.transaction_batches, 0),
    }
    for name, (value, minimum) in counts.items():
        if value < minimum:
            raise InvalidInputError(f"{name} must be >= {minimum}, got {value}")
    shares = (
        ("tombstones", options.tombstones),
        ("future_share", options.future_share),
        ("aborted_share", options.aborted_share),
    )
    for name, share in shares:
        if not 0.0 <= share <= 1.0:
            raise InvalidInputError(f"{name} is a fraction in [0, 1], got {share}")
    if options.idempotent and options.transaction_batches:
        raise InvalidInputError(
            "idempotent and transaction_batches name two producers: a transactional one is idempotent too"
        )
    if options.aborted_share and not options.transaction_batches:
        raise InvalidInputError("aborted_share needs transaction_batches: only a transaction can be aborted")
    if not MIN_SEGMENT_BYTES <= options.segment_bytes <= MAX_SEGMENT_BYTES:
        raise InvalidInputError(
            f"segment_bytes must be in [{MIN_SEGMENT_BYTES}, {MAX_SEGMENT_BYTES}], "
            f"got {options.segment_bytes}"
        )
    if options.cleanup_policy not in CLEANUP_POLICIES.values():
        raise InvalidInputError(
            f"cleanup_policy must be delete, compact or both, got {options.cleanup_policy}"
        )
    if not options.topics:
        raise InvalidInputError("at least one topic is needed")
    for topic in options.topics:
        if not is_valid_topic_name(topic):
            raise InvalidInputError(
                f"invalid topic name {topic!r}: 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'"
            )
    if len(set(options.topics)) != len(options.topics):
        raise InvalidInputError(f"topic names repeat: {', '.join(options.topics)}")


# -- generation ----------------------------------------------------------------------------------------


def generate(options: GenOptions, *, clock: Clock | None = None) -> list[GenResult]:
    """Append the workload to every requested partition of ``options.log_dir``; return each one's state.

    Existing partitions are loaded (with every other partition of the dir, so the checkpoints and the
    clean-shutdown marker written at the end stay true for all of them) and appended to; missing ones
    are created. The log dir's lock is held throughout, so a running service cannot share the dir. The
    topics' non-default configs are stored as their overrides (``GenOptions.topic_overrides``).
    """
    pool = random.Random(options.seed).randbytes(max(_VALUE_POOL_BYTES, 2 * options.value_size))
    return write_workload(
        options.log_dir,
        [TopicPartition(t, p) for t in options.topics for p in range(options.partitions)],
        options.log_config(),
        options.topic_overrides(),
        lambda log, now_ms: _fill_partition(log, options, pool, now_ms),
        clock=clock,
        metadata_log=options.metadata_log,
    )


def _fill_partition(log: PartitionLog, options: GenOptions, pool: bytes, now_ms: int) -> GenResult:
    tp = log.topic_partition
    rng = random.Random(f"{options.seed}/{tp.topic}/{tp.partition}")
    spread = options.timestamp_spread_ms
    start_ms = now_ms - spread if options.timestamp_start_ms is None else options.timestamp_start_ms
    last_index = max(options.records - 1, 1)
    draw, key_count = rng.random, options.key_count  # int(random() * n): uniform, 3x faster than randrange
    producer_id = options.producer_id
    first_sequence = _next_sequence(log, producer_id) if producer_id != NO_PRODUCER_ID else NO_SEQUENCE
    per_transaction = options.transaction_batches
    batch_count = -(-options.records // options.batch_size)
    for batch_index, first in enumerate(range(0, options.records, options.batch_size)):
        count = min(options.batch_size, options.records - first)
        if is_chosen(batch_index, options.future_share):
            timestamps = [now_ms + options.future_ms] * count
        else:
            timestamps = [start_ms + spread * i // last_index for i in range(first, first + count)]
        keys = [b"key-%d" % int(draw() * key_count) for _ in range(count)]
        values = _values(rng, pool, count, options)
        area = encode_records_area(timestamps, keys, values)
        if options.compression is not CompressionType.NONE:
            area = compress(options.compression, area)
        sequence = first_sequence + first if producer_id != NO_PRODUCER_ID else NO_SEQUENCE
        batch = _encode(area, count, timestamps, options, producer_id, sequence)
        _check_batch_size(len(batch), options, log.config)
        log.append_batches(batch)
        if per_transaction and ((batch_index + 1) % per_transaction == 0 or batch_index + 1 == batch_count):
            aborted = is_chosen(batch_index // per_transaction, options.aborted_share)
            log.append_batches(
                encode_end_txn_marker_batch(
                    offset=0,
                    producer_id=producer_id,
                    producer_epoch=0,
                    commit=not aborted,
                    timestamp=max(timestamps),
                )
            )
    logger.info("Generated %d records in %s", options.records, tp)
    return GenResult(
        tp.topic, tp.partition, options.records, log.log_end_offset, len(log.segments), log.size_bytes
    )


def _next_sequence(log: PartitionLog, producer_id: int) -> int:
    """Where the producer's sequences go on in this partition: after its last batch if a run before wrote
    some (a re-run appends, as the producer would), else from 0."""
    for entry in log.producer_state.snapshot_entries():
        if entry.producer_id == producer_id:
            return entry.last_sequence + 1
    return 0


def _values(rng: random.Random, pool: bytes, count: int, options: GenOptions) -> list[bytes | None]:
    size = options.value_size
    top = len(pool) - size
    tombstones = options.tombstones
    draw = rng.random
    values: list[bytes | None] = []
    for _ in range(count):
        if tombstones and draw() < tombstones:
            values.append(None)
        else:
            start = int(draw() * (top + 1))
            values.append(pool[start : start + size])
    return values


def _encode(
    area: bytes,
    count: int,
    timestamps: Sequence[int],
    options: GenOptions,
    producer_id: int,
    sequence: int,
) -> bytes:
    """A producer's batch (offsets from 0) around an already encoded records area."""
    # encode_batch takes the record count from len(records); the placeholders carry nothing else it reads.
    placeholders = [Record(i, timestamps[i], None, None) for i in range(count)]
    return encode_batch(
        placeholders,
        base_offset=0,
        last_offset_delta=count - 1,
        base_timestamp=timestamps[0],
        max_timestamp=max(timestamps),
        compression=options.compression,
        records_area=area,
        producer_id=producer_id,
        producer_epoch=0 if producer_id != NO_PRODUCER_ID else NO_PRODUCER_EPOCH,
        base_sequence=sequence,
        is_transactional=bool(options.transaction_batches),
    )


def _check_batch_size(size: int, options: GenOptions, config: LogConfig) -> None:
    """Refuse a batch the log would refuse, before appending it, with the options that fix it."""
    limit = min(config.max_message_bytes, config.segment_bytes)
    if size > limit:
        raise InvalidInputError(
            f"a generated batch is {size} bytes, over the limit of {limit} (max.message.bytes="
            f"{config.max_message_bytes}, segment.bytes={config.segment_bytes}); lower --batch-size "
            f"({options.batch_size}) or --value-size ({options.value_size}), or raise --segment-bytes"
        )


def encode_records_area(
    timestamps: Sequence[int], keys: Sequence[bytes | None], values: Sequence[bytes | None]
) -> bytes:
    """The uncompressed records area for records with offset deltas 0..n-1 and no headers.

    Byte for byte what ``records.encode_records`` writes (record layout in ``records.py``), relative to
    the first timestamp; varints of small numbers come from a table instead of being encoded each time.
    """
    cache = _VARINT_CACHE
    limit = len(cache)
    base_timestamp = timestamps[0]
    parts: list[bytes] = []
    append = parts.append
    for i, (timestamp, key, value) in enumerate(zip(timestamps, keys, values, strict=True)):
        delta = timestamp - base_timestamp
        body = b"".join(
            (
                b"\x00",
                cache[delta] if 0 <= delta < limit else encode_varint(delta),
                cache[i] if i < limit else encode_varint(i),
                _NULL if key is None else _sized(key, cache, limit),
                _NULL if value is None else _sized(value, cache, limit),
                b"\x00",
            )
        )
        size = len(body)
        append(cache[size] if size < limit else encode_varint(size))
        append(body)
    return b"".join(parts)


def _sized(data: bytes, cache: tuple[bytes, ...], limit: int) -> bytes:
    size = len(data)
    return (cache[size] if size < limit else encode_varint(size)) + data

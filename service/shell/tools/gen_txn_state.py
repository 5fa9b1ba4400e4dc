"""``logcleaner gen --workload transaction-state``: a ``__transaction_state`` topic as a transaction
coordinator writes it, for the decoders and the cleaner to work on.

Each transactional id (``txn-<i>``) lives in the partition Kafka's coordinator gives it
(``abs(transactionalId.hashCode()) % partitions``), and each of its state transitions is one record,
keyed by the id (TransactionLogKey v0), valued with its TransactionLogValue (v0, what Kafka 2.x-3.x write,
and 4.x under transaction version 1). Per id, in time order (the ids of a partition interleaved):

1. ``InitProducerId``: Empty, its producer id, epoch 0, no partitions, no start time;
2. per transaction: Ongoing (the partitions it added, its start time), then PrepareCommit and
   CompleteCommit, or PrepareAbort and CompleteAbort for ``aborted_transactions`` of them (spread evenly
   over all), the Complete one with no partitions left;
3. for an expired id (``expired_ids`` of them, spread evenly): a tombstone, as the coordinator writes once
   ``transactional.id.expiration.ms`` has passed.

Each value's last-update time is its batch's timestamp. Compaction leaves each id's newest state; a
tombstone goes once ``delete.retention.ms`` has passed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from service.base.errors import InvalidInputError
from service.shell.tools.coordinator_steps import Batch, Pair, fixed_batch, generate_coordinator_topic
from service.shell.tools.workload_dir import GenResult, is_chosen
from service.storage.coordinator_records import TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE, encode_versioned

__all__ = [
    "TRANSACTION_STATE_SEGMENT_BYTES",
    "TRANSACTION_STATE_TOPIC",
    "TransactionStateWorkload",
    "TxnStatus",
    "generate_transaction_state",
]

TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTION_STATE_SEGMENT_BYTES = 104_857_600  # Kafka's transaction.state.log.segment.bytes
FIRST_PRODUCER_ID = 1000  # txn-<i> gets producer id 1000 + i
TRANSACTION_TIMEOUT_MS = 60_000  # the producer's transaction.timeout.ms default
DATA_TOPIC = "topic-0"  # the topic the transactions write to, DATA_PARTITIONS partitions
DATA_PARTITIONS = 6


class TxnStatus:
    """TransactionLogValue's ``transaction_status``: Kafka's ``TransactionState`` ids."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5


@dataclass(frozen=True, slots=True)
class TransactionStateWorkload:
    """What to write: ``transactional_ids`` ids, each running ``transactions`` transactions."""

    log_dir: Path
    partitions: int = 1
    transactional_ids: int = 10
    transactions: int = 5
    aborted_transactions: float = 0.0
    expired_ids: float = 0.0
    timestamp_start_ms: int | None = None
    timestamp_spread_ms: int = 0
    segment_bytes: int = TRANSACTION_STATE_SEGMENT_BYTES
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("partitions", "transactional_ids", "transactions"):
            if getattr(self, name) < 1:
                raise InvalidInputError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("aborted_transactions", "expired_ids"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InvalidInputError(f"{name} is a fraction in [0, 1], got {getattr(self, name)}")

    def owners(self) -> list[str]:
        return [f"txn-{i}" for i in range(self.transactional_ids)]

    def batches(self, index: int, owner: str, rng: random.Random) -> list[Batch]:
        return _id_batches(self, index, owner, rng)


def generate_transaction_state(workload: TransactionStateWorkload) -> list[GenResult]:
    """Write ``workload`` into every partition of ``__transaction_state`` as a transaction coordinator
    would."""
    return generate_coordinator_topic(TRANSACTION_STATE_TOPIC, workload)


def _id_batches(workload: TransactionStateWorkload, index: int, name: str, rng: random.Random) -> list[Batch]:
    """The batches the coordinator writes for one transactional id, in order (the module docstring's)."""
    key = encode_versioned(TRANSACTION_LOG_KEY, 0, {"transactional_id": name})
    state = _IdState(key, FIRST_PRODUCER_ID + index)
    batches: list[Batch] = [state.init]
    for t in range(workload.transactions):
        is_aborted = is_chosen(index * workload.transactions + t, workload.aborted_transactions)
        added = sorted(rng.sample(range(DATA_PARTITIONS), rng.randint(1, 3)))
        batches.append(partial(state.begin, partitions=added))
        prepare, complete = (
            (TxnStatus.PREPARE_ABORT, TxnStatus.COMPLETE_ABORT)
            if is_aborted
            else (TxnStatus.PREPARE_COMMIT, TxnStatus.COMPLETE_COMMIT)
        )
        batches.append(partial(state.end, status=prepare))
        batches.append(partial(state.end, status=complete))
    if is_chosen(index, workload.expired_ids):
        batches.append(fixed_batch([(key, None)]))
    return batches


class _IdState:
    """One transactional id's coordinator state as its batches are stamped: a transaction's start time is
    its Ongoing batch's, carried into its Prepare and Complete values."""

    def __init__(self, key: bytes, producer_id: int) -> None:
        self.key = key
        self.producer_id = producer_id
        self.started_ms = -1
        self.partitions: list[int] = []

    def init(self, timestamp_ms: int) -> list[Pair]:
        return [(self.key, self._value(TxnStatus.EMPTY, None, timestamp_ms))]

    def begin(self, timestamp_ms: int, partitions: list[int]) -> list[Pair]:
        self.started_ms, self.partitions = timestamp_ms, partitions
        return [(self.key, self._value(TxnStatus.ONGOING, partitions, timestamp_ms))]

    def end(self, timestamp_ms: int, status: int) -> list[Pair]:
        is_complete = status in (TxnStatus.COMPLETE_COMMIT, TxnStatus.COMPLETE_ABORT)
        return [(self.key, self._value(status, [] if is_complete else self.partitions, timestamp_ms))]

    def _value(self, status: int, partitions: list[int] | None, timestamp_ms: int) -> bytes:
        values = {
            "producer_id": self.producer_id,
            "producer_epoch": 0,
            "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS,
            "transaction_status": status,
            "transaction_partitions": None
            if partitions is None
            else ([{"topic": DATA_TOPIC, "partition_ids": partitions}] if partitions else []),
            "transaction_last_update_timestamp_ms": timestamp_ms,
            "transaction_start_timestamp_ms": self.started_ms,
        }
        return encode_versioned(TRANSACTION_LOG_VALUE, 0, values)

"""Transaction tracking during a cleaning round (Kafka ``CleanedTransactionMetadata``).

A round walks every batch below its end offset in log order. Before looking at a batch, each aborted
transaction (from the ``.txnindex`` files) whose first offset is ≤ the batch's last offset becomes its
producer's *ongoing aborted* transaction. Then:

- a transactional data batch of a producer with an ongoing aborted transaction is aborted data: it may be
  discarded, and the transaction is marked "data seen"; any other transactional data batch puts its
  producer in the *ongoing committed* set; non-transactional batches are never aborted;
- an ABORT marker ends the producer's aborted transaction: if its data was seen this round the marker must
  stay and the transaction is re-written into the cleaned segment's ``.txnindex``; else it may go;
- a COMMIT marker may go iff no data of its transaction was seen this round;
- other control records stay; a control batch with no record (already cleaned) may go.

The state depends only on batch headers, control records and the aborted-transaction lists, never on the
key map, so a parallel path can precompute the state at each group's first batch and ``copy`` it into the
task that cleans that group. Owned by one round: no lock.

The C loops of ``cleaner._native`` read and change the same state for the batches they take: the set of
ongoing committed producers as it is, the aborted transactions through a ``NativeTxnCursor``.
"""

from __future__ import annotations

import array
import heapq
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from service.storage.control import ControlRecordType, decode_control_type
from service.storage.records import RecordBatch
from service.storage.segment import LogSegment
from service.storage.txn_index import AbortedTxn

__all__ = ["CleanedTransactionMetadata", "ControlBatchResult", "NativeTxnCursor", "collect_aborted_txns"]

_CURSOR_HEADER = 5  # transactions, the next to start, ongoing, retained, ongoing when laid out


@dataclass(frozen=True, slots=True)
class ControlBatchResult:
    """What a control batch means for cleaning: may it go, and which aborted txn it keeps indexed."""

    can_discard: bool
    retained_aborted_txn: AbortedTxn | None = None  # re-write into the cleaned segment's .txnindex


@dataclass(frozen=True, slots=True)
class _OngoingAborted:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None  # None until a data batch of the txn is read


@dataclass(frozen=True, slots=True)
class NativeTxnCursor:
    """The aborted transactions of a ``CleanedTransactionMetadata`` laid out for the C loops (``TxnCursor`` in
    ``native/txn_cursor.c``), which change ``cells`` as the methods would for the batches they take: int64
    cells, a header (transactions, the next to start, ongoing, retained, ongoing when laid out), then per
    transaction (first offset, producer id) — the ongoing ones, then the pending ones in the order they
    start —, per ongoing one (producer id, transaction, last offset of its data read or -1), and the
    transactions whose ABORT marker was kept, in order."""

    cells: array.array[int]
    txns: list[AbortedTxn]


class CleanedTransactionMetadata:
    """The per-round transaction state; ``copy`` gives an independent state to continue from."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, AbortedTxn]] = []  # (first offset, tie-break, txn): a min-heap
        self._sequence = itertools.count()
        self._ongoing_aborted: dict[int, _OngoingAborted] = {}
        self._ongoing_committed: set[int] = set()

    def copy(self) -> CleanedTransactionMetadata:
        other = CleanedTransactionMetadata()
        other._heap = list(self._heap)
        other._sequence = itertools.count(next(self._sequence))
        other._ongoing_aborted = dict(self._ongoing_aborted)
        other._ongoing_committed = set(self._ongoing_committed)
        return other

    def __getstate__(self) -> dict[str, object]:
        """Picklable (a parallel path ships a group's starting state to its task): the counter as an int."""
        position = next(self._sequence)
        self._sequence = itertools.count(position)
        return {**self.__dict__, "_sequence": position}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        start = state["_sequence"]
        self._sequence = itertools.count(start if isinstance(start, int) else 0)

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            heapq.heappush(self._heap, (txn.first_offset, next(self._sequence), txn))

    def on_batch_read(self, batch: RecordBatch) -> bool:
        """A data batch was read; True if it belongs to an aborted transaction (it may be discarded)."""
        self._consume_aborted_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(batch.producer_id)
        if ongoing is None:
            self._ongoing_committed.add(batch.producer_id)
            return False
        self._ongoing_aborted[batch.producer_id] = _OngoingAborted(ongoing.txn, batch.last_offset)
        return True

    @property
    def ongoing_committed(self) -> set[int]:
        """The producers whose transaction's data was read and whose COMMIT was not: the live set, which the
        C filter changes as ``on_batch_read`` and ``on_control_batch_read`` would for what it takes."""
        return self._ongoing_committed

    def native_cursor(self) -> NativeTxnCursor:
        """The aborted transactions, for the C loops to read and change; ``take_native`` takes them back
        (until then, only the C loops may use this state)."""
        ongoing = list(self._ongoing_aborted.values())
        txns = [o.txn for o in ongoing] + [txn for _first, _seq, txn in sorted(self._heap)]
        n, started = len(txns), len(ongoing)
        cells = array.array("q", (n, started, started, 0, started))
        for txn in txns:
            cells.extend((txn.first_offset, txn.producer_id))
        for index, o in enumerate(ongoing):
            seen = o.last_observed_batch_offset
            cells.extend((o.txn.producer_id, index, -1 if seen is None else seen))
        cells.extend(itertools.repeat(0, 3 * (n - started) + n))  # room for the ongoing and the retained
        return NativeTxnCursor(cells, txns)

    def take_native(self, cursor: NativeTxnCursor) -> list[AbortedTxn]:
        """The state as the C loops left ``cursor``; returns the transactions whose ABORT marker they kept
        (``ControlBatchResult.retained_aborted_txn``), in order."""
        cells, txns = cursor.cells, cursor.txns
        n, started, ongoing, retained, laid_out = cells[0:_CURSOR_HEADER]
        for _ in range(started - laid_out):
            heapq.heappop(self._heap)
        base = _CURSOR_HEADER + 2 * n
        self._ongoing_aborted = {}
        for i in range(ongoing):
            producer_id, index, seen = cells[base + 3 * i : base + 3 * i + 3]
            self._ongoing_aborted[producer_id] = _OngoingAborted(txns[index], None if seen < 0 else seen)
        kept = base + 3 * n
        return [txns[index] for index in cells[kept : kept + retained]]

    def on_plain_batch_read(self, last_offset: int) -> None:
        """A non-transactional data batch was read: ``on_batch_read`` from its header (never aborted)."""
        self._consume_aborted_up_to(last_offset)

    def on_control_batch_read(self, batch: RecordBatch) -> ControlBatchResult:
        """A control batch was read; may it go, and does it keep an aborted txn in the cleaned index?"""
        self._consume_aborted_up_to(batch.last_offset)
        records = batch.records()
        if not records:
            return ControlBatchResult(True)  # an empty control batch was already cleaned
        control_type = decode_control_type(records[0].key)
        producer_id = batch.producer_id
        if control_type is ControlRecordType.ABORT:
            ongoing = self._ongoing_aborted.pop(producer_id, None)
            if ongoing is not None and ongoing.last_observed_batch_offset is not None:
                return ControlBatchResult(False, ongoing.txn)  # its data is still there: keep the marker
            return ControlBatchResult(True)
        if control_type is ControlRecordType.COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return ControlBatchResult(False)
            return ControlBatchResult(True)
        return ControlBatchResult(False)

    def _consume_aborted_up_to(self, offset: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= offset:
            _first, _seq, txn = heapq.heappop(heap)
            # Kafka's getOrElseUpdate: an ongoing aborted txn of the producer is not replaced.
            self._ongoing_aborted.setdefault(txn.producer_id, _OngoingAborted(txn))


def collect_aborted_txns(segments: Sequence[LogSegment], start: int, upper_bound: int) -> list[AbortedTxn]:
    """Kafka ``UnifiedLog.collectAbortedTransactions``: aborted txns overlapping [start, upper_bound).

    Searches the ``.txnindex`` of the segment holding ``start`` and of each later segment, until an entry's
    last stable offset reaches the upper bound (no later segment can hold a txn starting below it).
    """
    first = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= start:
            first = i
    found: list[AbortedTxn] = []
    for segment in segments[first:]:
        result = segment.txn_index.search_aborted(start, upper_bound)
        found.extend(result.aborted_txns)
        if result.is_complete:
            break
    return found

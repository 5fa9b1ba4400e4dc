"""TransactionIndex on real files: Kafka's TransactionIndexTest, laziness, the 34-byte entry codec."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.base.errors import CorruptDataError, InvalidInputError
from service.storage.log_files import TXN_INDEX_SUFFIX, segment_path
from service.storage.txn_index import (
    AbortedTxn,
    TransactionIndex,
    TxnIndexSearchResult,
    decode_entries,
    encode_entries,
)

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)


@pytest.fixture
def index(tmp_path: Path) -> TransactionIndex:
    return TransactionIndex(segment_path(tmp_path, 0, TXN_INDEX_SUFFIX), 0)


def reopen(index: TransactionIndex, start_offset: int | None = None) -> TransactionIndex:
    index.close()
    return TransactionIndex(index.path, index.start_offset if start_offset is None else start_offset)


COLLECT_TXNS = [
    AbortedTxn(0, 0, 10, 11),
    AbortedTxn(1, 5, 15, 13),
    AbortedTxn(2, 18, 35, 25),
    AbortedTxn(3, 32, 50, 40),
]


# -- laziness -----------------------------------------------------------------------------------------


def test_the_file_is_created_by_the_first_append_only(index: TransactionIndex) -> None:
    assert index.all_aborted() == []
    assert index.collect_aborted(0, 100) == []
    index.truncate_to(5)
    index.truncate()
    index.sanity_check()
    index.trim_to_valid_size()
    index.flush()
    index.close()
    assert not index.path.exists()
    index.append(AbortedTxn(1, 0, 10, 11))
    assert index.path.stat().st_size == 34  # not preallocated


def test_rename_before_the_file_exists_only_moves_the_path(index: TransactionIndex) -> None:
    original = index.path
    deleted = original.with_name(original.name + ".deleted")
    index.rename_to(deleted)
    assert not original.exists() and not deleted.exists()
    index.append(AbortedTxn(1, 0, 10, 11))
    assert deleted.exists() and not original.exists()


def test_kafka_rename_index(index: TransactionIndex) -> None:
    first, second = AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16)
    index.append(first)
    renamed = index.path.with_name(index.path.name + ".swap")
    index.rename_to(renamed)
    index.append(second)
    assert index.collect_aborted(0, 100) == [first, second]
    assert reopen(index).all_aborted() == [first, second]
    assert index.path == renamed


def test_delete_if_exists(index: TransactionIndex) -> None:
    assert not index.delete_if_exists()
    index.append(AbortedTxn(1, 0, 10, 11))
    assert index.delete_if_exists()
    assert not index.path.exists()
    assert index.all_aborted() == []


# -- Kafka TransactionIndexTest ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fetch_offset", "upper_bound", "expected", "is_complete"),
    [
        (0, 100, COLLECT_TXNS, False),
        (0, 32, COLLECT_TXNS[:3], True),
        (0, 35, COLLECT_TXNS, True),
        (10, 35, COLLECT_TXNS, True),
        (11, 35, COLLECT_TXNS[1:], True),
        (20, 41, COLLECT_TXNS[2:], False),
    ],
)
def test_kafka_collect_aborted_txns(
    index: TransactionIndex,
    fetch_offset: int,
    upper_bound: int,
    expected: list[AbortedTxn],
    is_complete: bool,
) -> None:
    for txn in COLLECT_TXNS:
        index.append(txn)
    index = reopen(index)  # unlike the offset indexes, it reopens without losing anything
    assert index.collect_aborted(fetch_offset, upper_bound) == expected
    assert index.search_aborted(fetch_offset, upper_bound) == TxnIndexSearchResult(
        tuple(expected), is_complete
    )


def test_kafka_truncate(index: TransactionIndex) -> None:
    txns = [
        AbortedTxn(0, 0, 10, 2),
        AbortedTxn(1, 5, 15, 16),
        AbortedTxn(2, 18, 35, 25),
        AbortedTxn(3, 32, 50, 40),
    ]
    for txn in txns:
        index.append(txn)
    index.truncate_to(51)
    assert index.collect_aborted(0, 100) == txns
    index.truncate_to(50)
    assert index.collect_aborted(0, 100) == txns[:3]
    assert index.path.stat().st_size == 3 * 34  # write-through
    assert reopen(index).all_aborted() == txns[:3]
    index.truncate()
    assert index.collect_aborted(0, 100) == []
    assert index.path.stat().st_size == 0


@pytest.mark.parametrize("second_last_offset", [15, 10])
def test_kafka_last_offset_must_increase(index: TransactionIndex, second_last_offset: int) -> None:
    index.append(AbortedTxn(1, 5, 15, 13))
    with pytest.raises(InvalidInputError, match="does not end after the last one, at offset 15"):
        index.append(AbortedTxn(0, 0, second_last_offset, 11))
    assert reopen(index).all_aborted() == [AbortedTxn(1, 5, 15, 13)]


def test_append_refuses_a_transaction_ending_below_the_start_offset(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "00000000000000000100.txnindex", 100)
    with pytest.raises(InvalidInputError, match="below the start offset 100"):
        index.append(AbortedTxn(1, 90, 99, 100))


def test_kafka_sanity_check(index: TransactionIndex) -> None:
    index.append(AbortedTxn(0, 0, 10, 11))
    index.append(AbortedTxn(1, 5, 15, 13))
    reopen(index).sanity_check()
    with pytest.raises(CorruptDataError, match="below the index start offset 100") as caught:
        reopen(index, start_offset=100).sanity_check()  # a different start offset fakes invalid data
    assert (caught.value.path, caught.value.position) == (str(index.path), 0)


def test_sanity_check_rejects_a_partial_entry_and_a_wrong_version(index: TransactionIndex) -> None:
    good = AbortedTxn(1, 0, 10, 11).encode()
    index.path.write_bytes(good + good[:20])
    with pytest.raises(CorruptDataError, match="length 54 is not a multiple of 34") as caught:
        index.sanity_check()
    assert (caught.value.path, caught.value.position) == (str(index.path), 34)
    index.path.write_bytes(good + b"\x00\x01" + good[2:])
    with pytest.raises(CorruptDataError, match="version 1") as caught:
        index.sanity_check()
    assert caught.value.position == 34
    with pytest.raises(CorruptDataError):
        index.all_aborted()


def test_truncate_to_the_start_offset_works_on_a_corrupt_file(index: TransactionIndex) -> None:
    index.path.write_bytes(b"\x00\x07" + bytes(40))  # what recovery does before rebuilding
    index.truncate_to(0)
    assert index.path.stat().st_size == 0
    index.append(AbortedTxn(1, 0, 10, 11))
    assert reopen(index).all_aborted() == [AbortedTxn(1, 0, 10, 11)]


# -- codec ------------------------------------------------------------------------------------------------


def test_kafka_aborted_txn_serde() -> None:
    txn = AbortedTxn(producer_id=983493, first_offset=137, last_offset=299, last_stable_offset=200)
    data = txn.encode()
    assert data == (
        b"\x00\x00"
        + (983493).to_bytes(8, "big")
        + (137).to_bytes(8, "big")
        + (299).to_bytes(8, "big")
        + (200).to_bytes(8, "big")
    )
    assert AbortedTxn.decode(data) == txn


@given(st.lists(st.builds(AbortedTxn, INT64, INT64, INT64, INT64), max_size=20))
def test_encode_decode_round_trip(txns: list[AbortedTxn]) -> None:
    data = encode_entries(txns)
    assert len(data) == 34 * len(txns)
    assert decode_entries(data) == txns


def test_encode_rejects_a_field_beyond_int64() -> None:
    with pytest.raises(InvalidInputError, match="int64"):
        AbortedTxn(1 << 63, 0, 0, 0).encode()


@given(st.binary(max_size=120))
def test_arbitrary_bytes_raise_only_corrupt_data_error_from_decode(data: bytes) -> None:
    try:
        txns = decode_entries(data)
    except CorruptDataError:
        return
    assert encode_entries(txns) == data


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(data=st.binary(max_size=120))
def test_arbitrary_file_bytes_raise_only_corrupt_data_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(data)
    index = TransactionIndex(path, 0)
    for check in (index.sanity_check, index.all_aborted):
        with suppress(CorruptDataError):
            check()

"""``gen --workload transaction-state``: a transaction coordinator's __transaction_state, decoded and
compacted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.base.errors import InvalidInputError
from service.shell.tools.coordinator_steps import coordinator_partition
from service.shell.tools.gen_txn_state import TransactionStateWorkload, TxnStatus
from service.storage.coordinator_records import decode_transaction_log_record
from tests.service.shell.tools.coordinator_helpers import generate as generate_workload
from tests.service.shell.tools.coordinator_helpers import latest_per_key, records_per_partition, run

PARTITIONS = 3
IDS = 12
TRANSACTIONS = 4
ABORTED = 0.3
COMMIT = [TxnStatus.ONGOING, TxnStatus.PREPARE_COMMIT, TxnStatus.COMPLETE_COMMIT]
ABORT = [TxnStatus.ONGOING, TxnStatus.PREPARE_ABORT, TxnStatus.COMPLETE_ABORT]


def generate(capsys: pytest.CaptureFixture[str], log_dir: Path) -> list[dict[str, int]]:
    return generate_workload(
        capsys,
        log_dir,
        "transaction-state",
        *(
            "--partitions",
            str(PARTITIONS),
            "--transactional-ids",
            str(IDS),
            "--transactions",
            str(TRANSACTIONS),
        ),
        *("--aborted-transactions", str(ABORTED), "--expired-ids", "0.25"),
    )


def test_statuses_are_kafkas_transaction_state_ids() -> None:
    statuses = (TxnStatus.EMPTY, TxnStatus.ONGOING, TxnStatus.PREPARE_COMMIT, TxnStatus.PREPARE_ABORT)
    assert (*statuses, TxnStatus.COMPLETE_COMMIT, TxnStatus.COMPLETE_ABORT) == (0, 1, 2, 3, 4, 5)


def test_options_are_checked() -> None:
    with pytest.raises(InvalidInputError, match="transactions must be >= 1, got 0"):
        TransactionStateWorkload(Path("x"), transactions=0)
    with pytest.raises(InvalidInputError, match=r"expired_ids is a fraction in \[0, 1\], got 1.5"):
        TransactionStateWorkload(Path("x"), expired_ids=1.5)


def test_each_id_writes_its_transitions_into_its_partition(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    results = generate(capsys, tmp_path)
    per_partition = records_per_partition(tmp_path)
    assert [r["partition"] for r in results] == [0, 1, 2] and set(per_partition) == {0, 1, 2}
    # per id: InitProducerId + 3 transitions a transaction; the 3 expired ids add a tombstone each
    assert sum(r["records"] for r in results) == IDS * (1 + 3 * TRANSACTIONS) + 3
    values: dict[str, list[dict[str, object]]] = {}
    tombstoned: list[str] = []
    for partition, records in per_partition.items():
        timestamps = [record.timestamp for record in records]
        assert timestamps == sorted(timestamps)  # the ids interleave, as a coordinator writes them
        for record in records:
            decoded = decode_transaction_log_record(record.key, record.value)
            key, value = decoded["key"], decoded["value"]
            assert isinstance(key, dict) and "note" not in key
            name = str(key["transactional_id"])
            assert coordinator_partition(name, PARTITIONS) == partition
            if value is None:
                tombstoned.append(name)
                continue
            assert isinstance(value, dict) and "note" not in value and value["version"] == 0
            assert value["transaction_last_update_timestamp_ms"] == record.timestamp
            values.setdefault(name, []).append(value)
    assert sorted(tombstoned) == ["txn-11", "txn-3", "txn-7"]  # a quarter of the ids, spread evenly
    aborted = 0
    for index in range(IDS):
        states = values[f"txn-{index}"]
        assert states[0]["transaction_status"] == TxnStatus.EMPTY
        assert states[0]["transaction_partitions"] is None
        assert states[0]["transaction_start_timestamp_ms"] == -1
        assert {s["producer_id"] for s in states} == {1000 + index}
        for t in range(TRANSACTIONS):
            ongoing, prepare, complete = states[1 + 3 * t : 4 + 3 * t]
            statuses = [s["transaction_status"] for s in (ongoing, prepare, complete)]
            assert statuses in (COMMIT, ABORT)
            aborted += statuses == ABORT
            partitions = ongoing["transaction_partitions"]
            assert isinstance(partitions, list) and len(partitions) == 1 and partitions[0]["partition_ids"]
            assert prepare["transaction_partitions"] == partitions
            assert complete["transaction_partitions"] == []
            started = ongoing["transaction_last_update_timestamp_ms"]
            assert {s["transaction_start_timestamp_ms"] for s in (ongoing, prepare, complete)} == {started}
    assert aborted == int(IDS * TRANSACTIONS * ABORTED)


def test_the_cleaner_keeps_each_ids_newest_state(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    generate(capsys, tmp_path)
    before = records_per_partition(tmp_path)
    code, out, err = run(
        capsys, "clean", "--override", f"log.dirs={tmp_path}", "--override", "log.cleaner.engine=in-process"
    )
    assert code == 0, err
    after = records_per_partition(tmp_path)
    for partition in before:
        assert latest_per_key(after[partition]) == latest_per_key(before[partition])
        assert len(after[partition]) < len(before[partition])
    *cleaned, _active = sorted((tmp_path / "__transaction_state-0").glob("*.log"))
    code, out, _ = run(capsys, "dump", "--transaction-log-decoder", "--json", *map(str, cleaned))
    assert code == 0 and '"note"' not in out
    ids = [
        r["decoded"]["key"]["transactional_id"]
        for f in json.loads(out)["files"]
        for b in f["batches"]
        for r in b["records"]
    ]
    assert ids and len(ids) == len(set(ids))  # the cleaned section holds each id's newest state once


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--topic", "x"), "--workload transaction-state writes __transaction_state only"),
        (("--idempotent",), "--workload transaction-state writes as a coordinator does, with no producer id"),
    ],
)
def test_producer_and_topic_options_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    code, out, err = run(capsys, "gen", "--log-dir", str(tmp_path), "--workload", "transaction-state", *extra)
    assert (code, out) == (2, "")
    assert message in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())

"""``gen --workload consumer-offsets``: a coordinator's __consumer_offsets, decoded and compacted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.base.errors import InvalidInputError
from service.shell.tools.coordinator_steps import coordinator_partition
from service.shell.tools.gen_offsets import OffsetsWorkload
from service.storage.coordinator_records import decode_offsets_record
from tests.service.shell.tools.coordinator_helpers import (
    SPREAD_MS,
    START_MS,
    latest_per_key,
    records_per_partition,
    run,
)
from tests.service.shell.tools.coordinator_helpers import generate as generate_workload

PARTITIONS = 3
GROUPS = 8


def generate(capsys: pytest.CaptureFixture[str], log_dir: Path, *extra: str) -> list[dict[str, int]]:
    return generate_workload(
        capsys,
        log_dir,
        "consumer-offsets",
        *("--partitions", str(PARTITIONS), "--groups", str(GROUPS), "--group-topics", "2"),
        *("--group-partitions", "3", "--commits", "4", "--expired-groups", "0.25", *extra),
    )


def test_coordinator_partition_is_kafkas() -> None:
    assert coordinator_partition("", 50) == 0
    assert coordinator_partition("a", 50) == 97 % 50
    assert coordinator_partition("hello", 50) == 99162322 % 50  # "hello".hashCode()
    assert coordinator_partition("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE
    assert coordinator_partition("zz", 7) == (122 * 31 + 122) % 7


def test_options_are_checked() -> None:
    with pytest.raises(InvalidInputError, match="groups must be >= 1, got 0"):
        OffsetsWorkload(Path("x"), groups=0)


def test_every_record_decodes_and_lands_in_its_groups_partition(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    results = generate(capsys, tmp_path)
    assert [r["partition"] for r in results] == [0, 1, 2]
    per_partition = records_per_partition(tmp_path)
    assert set(per_partition) == {0, 1, 2}
    assert sum(r["records"] for r in results) == sum(len(v) for v in per_partition.values())
    # per group: 2 metadata + 4 rounds x 6 offsets; the 2 expired groups add 6 + 1 tombstones
    assert sum(r["records"] for r in results) == GROUPS * (2 + 4 * 6) + 2 * 7
    tombstoned: set[str] = set()
    for partition, records in per_partition.items():
        timestamps = [record.timestamp for record in records]
        assert timestamps == sorted(timestamps)  # the groups interleave, as a coordinator writes them
        assert (timestamps[0], timestamps[-1]) == (START_MS, START_MS + SPREAD_MS)
        for record in records:
            decoded = decode_offsets_record(record.key, record.value)
            key = decoded["key"]
            assert isinstance(key, dict) and "note" not in key
            assert coordinator_partition(str(key["group"]), PARTITIONS) == partition
            if decoded["value"] is None:
                tombstoned.add(str(key["group"]))
            else:
                assert isinstance(decoded["value"], dict) and "note" not in decoded["value"]
                assert decoded["value"]["version"] == 3
    assert tombstoned == {"group-3", "group-7"}  # a quarter of the groups, spread evenly
    assert (tmp_path / "__consumer_offsets-0" / "partition.metadata").exists()


def test_the_cleaner_keeps_the_newest_commit_per_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    generate(capsys, tmp_path)
    before = records_per_partition(tmp_path)
    code, out, err = run(
        capsys,
        "clean",
        "--override",
        f"log.dirs={tmp_path}",
        "--override",
        "log.cleaner.engine=in-process",
        "--json",
    )
    assert code == 0, err
    cleaned = {c["partition"] for c in json.loads(out)["cleaned"]}
    assert cleaned == {0, 1, 2}  # the workload's stored config says compact
    after = records_per_partition(tmp_path)
    for partition in before:
        assert latest_per_key(after[partition]) == latest_per_key(before[partition])
        assert len(after[partition]) < len(before[partition])
    code, out, _ = run(
        capsys,
        "dump",
        "--offsets-decoder",
        "--json",
        str(tmp_path / "__consumer_offsets-0" / f"{0:020d}.log"),
    )
    assert code == 0 and '"note"' not in out
    # the same group's key now appears once in the cleaned first segment
    groups = [r["decoded"]["key"] for b in json.loads(out)["files"][0]["batches"] for r in b["records"]]
    keys = [json.dumps(k, sort_keys=True) for k in groups]
    assert len(keys) == len(set(keys))


def test_the_workload_writes_no_other_topic(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(
        capsys, "gen", "--log-dir", str(tmp_path), "--workload", "consumer-offsets", "--topic", "x"
    )
    assert (code, out) == (2, "")
    assert "writes __consumer_offsets only" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())

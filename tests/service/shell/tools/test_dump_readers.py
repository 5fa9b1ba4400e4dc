"""``dump_readers``: the kind of a file from its name (temporary suffixes looked through), and each reader
yielding what it decodes in file order with a ``DumpProblem`` where the bytes are bad: a batch whose CRC does
not match is yielded with ``crc_valid`` False and reading goes on; an index's partial last entry is named.
(The ``dump`` command's output is in ``test_dump.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.clock import ManualClock
from service.shell.tools.dump_readers import BatchDump, DumpProblem, file_kind, read_file
from service.storage.loader import load_partition_log
from service.storage.log_config import LogConfig
from service.storage.offset_index import encode_entries as encode_offset_entries
from service.storage.records import Record

NOW_MS = 1_700_000_000_000


def write_segment(directory: Path) -> Path:
    """A segment of three one-record batches (``a``, ``b``, ``c``), closed cleanly."""
    directory.mkdir(parents=True)
    log = load_partition_log(directory, LogConfig(), clock=ManualClock(NOW_MS)).log
    for key in (b"a", b"b", b"c"):
        log.append_records([Record(0, NOW_MS, key, b"value-" + key)])
    path = log.segments[0].log_path
    log.close()
    return path


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("00000000000000000000.log", "log"),
        ("00000000000000000000.log.deleted", "log"),
        ("00000000000000000000.log.cleaned", "log"),
        ("00000000000000000000.index.swap", "index"),
        ("00000000000000000000.timeindex", "timeindex"),
        ("00000000000000000000.txnindex.deleted", "txnindex"),
        ("recovery-point-offset-checkpoint", "checkpoint"),
        (".kafka_cleanshutdown", "clean_shutdown"),
        ("00000000000000000000.snapshot", "snapshot"),
        ("00000000000000000003.snapshot.deleted", "snapshot"),
        ("leader-epoch-checkpoint", "leader_epoch"),
        ("partition.metadata", "partition_metadata"),
        (".snapshot", None),
        ("server.properties", None),
        (".log", None),
    ],
)
def test_file_kind(name: str, kind: str | None) -> None:
    assert file_kind(Path(name)) == kind


def test_a_segment_is_read_batch_by_batch_with_records_when_asked(tmp_path: Path) -> None:
    path = write_segment(tmp_path / "t-0")

    bare = list(read_file(path, "log"))
    full = list(read_file(path, "log", with_records=True))

    assert all(isinstance(item, BatchDump) and item.crc_valid and item.records is None for item in bare)
    assert [item.batch.base_offset for item in bare if isinstance(item, BatchDump)] == [0, 1, 2]
    records = [item.records for item in full if isinstance(item, BatchDump)]
    assert [[r.key for r in batch or ()] for batch in records] == [[b"a"], [b"b"], [b"c"]]


def test_a_crc_mismatch_is_yielded_as_such_and_reading_goes_on(tmp_path: Path) -> None:
    path = write_segment(tmp_path / "t-0")
    second = list(read_file(path, "log"))[1]
    assert isinstance(second, BatchDump)
    data = bytearray(path.read_bytes())
    data[second.batch.position + second.batch.size_bytes - 1] ^= 0xFF  # the last byte of its value
    path.write_bytes(bytes(data))

    items = list(read_file(path, "log"))

    assert [(type(i).__name__, getattr(i, "crc_valid", None)) for i in items] == [
        ("BatchDump", True),
        ("BatchDump", False),
        ("DumpProblem", None),  # the mismatch named at the batch's position
        ("BatchDump", True),
    ]
    problem = items[2]
    assert isinstance(problem, DumpProblem) and problem.position == second.batch.position
    assert "CRC" in problem.message or "crc" in problem.message


def test_an_index_with_a_partial_entry_yields_its_entries_then_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(encode_offset_entries([(1, 0), (2, 70)], base_offset=0) + b"\x00\x00\x00")

    items = list(read_file(path, "index"))

    *entries, problem = items
    assert len(entries) == 2 and not any(isinstance(e, DumpProblem) for e in entries)
    assert isinstance(problem, DumpProblem) and problem.position == 16
    assert problem.message == "offset index length 19 is not a multiple of 8: a partial entry at the end"

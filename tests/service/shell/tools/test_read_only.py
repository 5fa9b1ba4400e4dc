"""``read_only``: the scratch copies an inspection loads a partition from when its load would write.
Small files are copied; a ``.log`` is copied when loading may rewrite it (the active segment, one whose
indexes fail Kafka's light check, every one after an unclean stop) and otherwise linked to the original;
copies of same-named dirs do not meet, map back to their log dir, and log lines that name a copy name the
operator's file instead. Plus the ``log.dirs`` checks every offline command starts with."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.base.errors import InvalidInputError, NotFoundError
from service.shell.tools.read_only import ScratchCopies, check_log_dir_paths, require_log_dirs, scratch_copies

NAMES = [f"{base:020d}" for base in (0, 100, 200)]


def partition_dir(log_dir: Path, name: str = "orders-0") -> Path:
    """Three segments with whole indexes (the last is the active one), a snapshot and partition.metadata."""
    directory = log_dir / name
    directory.mkdir(parents=True)
    for stem in NAMES:
        (directory / f"{stem}.log").write_bytes(b"L" * 70)
        (directory / f"{stem}.index").write_bytes(b"\x00" * 16)
        (directory / f"{stem}.timeindex").write_bytes(b"\x00" * 24)
    (directory / f"{NAMES[-1]}.snapshot").write_bytes(b"S")
    (directory / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    return directory


@pytest.fixture
def copies(tmp_path: Path) -> Iterator[ScratchCopies]:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    yield ScratchCopies(scratch)


def linked(path: Path) -> bool:
    return path.is_symlink()


def test_sealed_logs_with_whole_indexes_are_linked_and_the_rest_copied(
    tmp_path: Path, copies: ScratchCopies
) -> None:
    original = partition_dir(tmp_path / "logs")
    copy = copies.copy(original, every_log=False)
    assert copy.name == "orders-0" and copies.copied == 1
    assert sorted(p.name for p in copy.iterdir()) == sorted(p.name for p in original.iterdir())
    assert [linked(copy / f"{n}.log") for n in NAMES] == [True, True, False], "the active segment is copied"
    assert (copy / f"{NAMES[0]}.log").resolve() == (original / f"{NAMES[0]}.log").resolve()
    assert not any(linked(p) for p in copy.iterdir() if not p.name.endswith(".log")), "small files copied"
    (copy / "partition.metadata").write_text("changed")
    assert "changed" not in (original / "partition.metadata").read_text(), "a copy, not the original"


@pytest.mark.parametrize(
    ("damage", "suffix"),
    [("missing", ".index"), ("missing", ".timeindex"), ("partial", ".index"), ("partial", ".timeindex")],
)
def test_a_log_whose_indexes_fail_kafkas_check_is_copied(
    tmp_path: Path, copies: ScratchCopies, damage: str, suffix: str
) -> None:
    """Kafka rebuilds an index that is missing or holds a partial entry (8-byte offset entries, 12-byte
    time entries): loading would rewrite that segment."""
    original = partition_dir(tmp_path / "logs")
    index = original / f"{NAMES[0]}{suffix}"
    if damage == "missing":
        index.unlink()
    else:
        index.write_bytes(b"\x00" * 5)
    copy = copies.copy(original, every_log=False)
    assert [linked(copy / f"{n}.log") for n in NAMES] == [False, True, False]


def test_after_an_unclean_stop_every_log_is_copied(tmp_path: Path, copies: ScratchCopies) -> None:
    original = partition_dir(tmp_path / "logs")
    copy = copies.copy(original, every_log=True)
    assert not any(linked(p) for p in copy.iterdir())


def test_same_named_dirs_of_two_log_dirs_do_not_meet_and_map_back(
    tmp_path: Path, copies: ScratchCopies
) -> None:
    first = copies.copy(partition_dir(tmp_path / "a"), every_log=False)
    second = copies.copy(partition_dir(tmp_path / "b"), every_log=False)
    assert first != second and first.name == second.name
    assert copies.original_log_dir(first.parent) == tmp_path / "a"
    assert copies.original_log_dir(second.parent) == tmp_path / "b"
    assert copies.original_log_dir(tmp_path / "c") == tmp_path / "c", "not a copy: itself"
    message = f"torn tail in {second}/{NAMES[-1]}.log truncated"
    assert (
        copies.originals_named(message)
        == f"torn tail in {tmp_path / 'b' / 'orders-0'}/{NAMES[-1]}.log truncated"
    )


def test_a_share_selects_its_partition_dirs(tmp_path: Path) -> None:
    share = ScratchCopies(tmp_path, frozenset({"orders-0", "orders-2"}))
    assert [share.selects(n) for n in ("orders-0", "orders-1", "orders-2")] == [True, False, True]
    assert ScratchCopies(tmp_path).selects("anything")


def test_a_share_surveys_the_topics_it_has_dirs_of(tmp_path: Path) -> None:
    share = ScratchCopies(
        tmp_path, frozenset({"orders-0", "pay-ments-2", "old-1.0123456789abcdef0123456789abcdef-stray"})
    )
    assert [share.surveys(t) for t in ("orders", "pay-ments", "old", "pay", "other")] == [
        True,
        True,
        True,
        False,
        False,
    ]
    assert ScratchCopies(tmp_path).surveys("anything")


def test_the_scratch_folder_goes_and_log_lines_name_the_originals(tmp_path: Path) -> None:
    """A line about a copy names the operator's file and says nothing in the log dir changed."""
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with scratch_copies() as copies:
            copy = copies.copy(partition_dir(tmp_path / "logs"), every_log=False)
            scratch = copy.parent.parent
            logging.getLogger("service.storage.segment").warning("Truncated %s at %d", copy / "x.log", 5)
        logging.getLogger("service.storage.segment").warning("after %s", copy)
    finally:
        root.removeHandler(handler)
    assert not scratch.exists()
    assert seen[0] == (
        f"Truncated {tmp_path / 'logs' / 'orders-0' / 'x.log'} at 5 "
        "(in a read-only copy: nothing in the log dir was changed)"
    )
    assert seen[1] == f"after {copy}", "the filter is gone with the scratch folder"


def test_log_dirs_must_be_listable_dirs(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(InvalidInputError, match="is a file, not a directory"):
        check_log_dir_paths([a_file])
    check_log_dir_paths([tmp_path, tmp_path / "missing"])  # a missing one is for the command to decide
    with pytest.raises(NotFoundError, match=r"does not exist.*only 'logcleaner serve' creates"):
        require_log_dirs([tmp_path, tmp_path / "missing"])
    require_log_dirs([tmp_path])

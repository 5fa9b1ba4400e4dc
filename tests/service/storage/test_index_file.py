"""``index_file``'s shared checks and reads, on real files: an index holds whole entries only (a partial last
one is ``CorruptDataError`` at its position), a missing index is ``FileNotFoundError`` only where it must
exist, a length from a dir listing is checked as a ``stat`` would be, and a file is read whole. (The offset,
time and transaction indexes built on ``IndexFile`` and ``AbstractIndex`` have their own test files.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from service.base.errors import CorruptDataError
from service.storage.index_file import (
    check_index_file_length,
    check_listed_index_length,
    check_whole_entries,
    read_whole_file,
)
from service.storage.offset_index import OffsetIndex
from service.storage.time_index import TimeIndex


def test_whole_entries_pass_and_a_partial_one_is_named_at_its_position() -> None:
    check_whole_entries(0, 8, kind="offset index", path="x.index")
    check_whole_entries(24, 12, kind="time index", path="x.timeindex")

    with pytest.raises(CorruptDataError, match="offset index length 19 is not a multiple of 8") as raised:
        check_whole_entries(19, 8, kind="offset index", path="x.index")

    assert (raised.value.path, raised.value.position) == ("x.index", 16)


def test_an_index_file_is_checked_by_its_length(tmp_path: Path) -> None:
    whole, partial = tmp_path / "whole.index", tmp_path / "partial.timeindex"
    whole.write_bytes(bytes(16))
    partial.write_bytes(bytes(13))

    check_index_file_length(str(whole), OffsetIndex, must_exist=True)
    with pytest.raises(CorruptDataError, match="time index length 13 is not a multiple of 12"):
        check_index_file_length(str(partial), TimeIndex, must_exist=True)


def test_a_missing_index_is_an_error_only_where_it_must_exist(tmp_path: Path) -> None:
    missing = str(tmp_path / "00000000000000000000.index")

    check_index_file_length(missing, OffsetIndex, must_exist=False)
    with pytest.raises(FileNotFoundError, match=r"offset index .* is missing"):
        check_index_file_length(missing, OffsetIndex, must_exist=True)


def test_a_listed_length_is_checked_as_a_stat_would_be(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(bytes(25))

    check_listed_index_length(str(path), 24, TimeIndex, must_exist=True)  # the listing's length, trusted
    check_listed_index_length(str(path), None, TimeIndex, must_exist=False)
    with pytest.raises(FileNotFoundError, match="is missing"):
        check_listed_index_length(str(path), None, TimeIndex, must_exist=True)
    with pytest.raises(CorruptDataError, match="length 25"):  # -1: the listing's stat failed, stat again
        check_listed_index_length(str(path), -1, TimeIndex, must_exist=True)
    with pytest.raises(CorruptDataError, match="length 7"):
        check_listed_index_length(str(path), 7, TimeIndex, must_exist=True)


def test_a_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "data"
    data = bytes(range(256)) * 1000
    path.write_bytes(data)
    (tmp_path / "empty").write_bytes(b"")

    assert read_whole_file(str(path)) == data
    assert read_whole_file(str(tmp_path / "empty")) == b""
    with pytest.raises(FileNotFoundError):
        read_whole_file(str(tmp_path / "absent"))

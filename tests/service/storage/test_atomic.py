"""write_atomically / rename_durably: the new content or the old, never a torn file or a stray .tmp."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from service.storage.atomic import TMP_SUFFIX, fsync_dir, rename_durably, write_atomically


def _tmp_of(path: Path) -> Path:
    return path.with_name(path.name + TMP_SUFFIX)


def test_write_creates_file_and_leaves_no_tmp(tmp_path: Path) -> None:
    target = tmp_path / "recovery-point-offset-checkpoint"

    write_atomically(target, b"0\n0\n")

    assert target.read_bytes() == b"0\n0\n"
    assert not _tmp_of(target).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]


def test_write_replaces_existing_content(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old content that is longer than the new one")

    write_atomically(target, b"new")

    assert target.read_bytes() == b"new"


def test_write_empty_data(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old")

    write_atomically(target, b"")

    assert target.read_bytes() == b""


def test_stale_tmp_is_overwritten(tmp_path: Path) -> None:
    """A .tmp left by a crash in an earlier write is simply truncated and reused."""
    target = tmp_path / "f"
    _tmp_of(target).write_bytes(b"partial garbage from a crash, longer than the new data")

    write_atomically(target, b"fresh")

    assert target.read_bytes() == b"fresh"
    assert not _tmp_of(target).exists()


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_failed_write_keeps_old_file_and_removes_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old")

    def fail(*args: object) -> None:
        raise OSError(errno.EIO, "injected I/O error")

    monkeypatch.setattr(os, failing, fail)
    with pytest.raises(OSError, match="injected"):
        write_atomically(target, b"new")
    monkeypatch.undo()

    assert target.read_bytes() == b"old"
    assert not _tmp_of(target).exists()


def test_failed_write_into_missing_dir_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomically(tmp_path / "absent" / "f", b"x")
    assert not (tmp_path / "absent").exists()


def test_directory_sync_error_other_than_unsupported_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(fd: int) -> None:
        raise OSError(errno.EIO, "injected I/O error")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="injected"):
        fsync_dir(tmp_path)


def test_directory_sync_unsupported_is_tolerated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(fd: int) -> None:
        raise OSError(errno.EINVAL, "fsync not supported on this directory")

    monkeypatch.setattr(os, "fsync", fail)
    fsync_dir(tmp_path)  # no error


def test_rename_durably_replaces_target(tmp_path: Path) -> None:
    src, dst = tmp_path / "00000000000000000000.log.cleaned", tmp_path / "00000000000000000000.log.swap"
    src.write_bytes(b"cleaned")
    dst.write_bytes(b"stale")

    rename_durably(src, dst)

    assert not src.exists()
    assert dst.read_bytes() == b"cleaned"


def test_rename_durably_moves_a_directory(tmp_path: Path) -> None:
    src = tmp_path / "foo-0"
    src.mkdir()
    (src / "00000000000000000000.log").write_bytes(b"")
    dst = tmp_path / "foo-0.0123456789abcdef0123456789abcdef-delete"

    rename_durably(src, dst)

    assert not src.exists()
    assert (dst / "00000000000000000000.log").exists()

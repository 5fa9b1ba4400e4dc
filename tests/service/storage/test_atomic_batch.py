"""AtomicBatch: many files replaced crash-safely with two syncs in all (service/storage/atomic_batch.py)."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service.storage.atomic_batch import AtomicBatch, sync_file_system, write_atomically_many
from tests.paths import REPO
from tests.service.storage.batch_writer import content_for


def make_files(directory: Path, count: int, content: bytes = b"old\n") -> list[Path]:
    paths = [directory / f"file-{n}" for n in range(count)]
    for path in paths:
        path.write_bytes(content)
    return paths


def contents(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_write_atomically_many_replaces_every_file_and_leaves_no_tmp(tmp_path: Path) -> None:
    paths = make_files(tmp_path, 5)
    write_atomically_many({p: f"new {p.name}\n".encode() for p in paths})
    assert contents(tmp_path) == {p.name: f"new {p.name}\n".encode() for p in paths}


def test_a_kill_after_any_step_leaves_each_file_old_or_new(tmp_path: Path) -> None:
    """What a kill leaves is the files as they are at that moment: copied after each step and checked."""
    live = tmp_path / "live"
    live.mkdir()
    paths = make_files(live, 6)
    new = {p: f"new content of {p.name}\n".encode() for p in paths}
    copies: list[Path] = []

    def kill_now() -> None:
        copies.append(tmp_path / f"killed-{len(copies)}")
        shutil.copytree(live, copies[-1])

    batch = AtomicBatch()
    for path in paths:
        batch.stage(path, new[path])
        kill_now()
    batch.sync()
    kill_now()
    for path in paths:
        batch.commit(path)
        kill_now()
    batch.finish()
    for copy in copies:
        for path in paths:
            assert (copy / path.name).read_bytes() in (b"old\n", new[path]), copy
    renamed = [sum((c / p.name).read_bytes() == new[p] for p in paths) for c in copies]
    assert renamed == [0] * 7 + [1, 2, 3, 4, 5, 6]  # each rename in its turn, none before the sync
    assert contents(live) == {p.name: new[p] for p in paths}


def test_abandon_after_a_failed_stage_keeps_the_old_files(tmp_path: Path) -> None:
    paths = make_files(tmp_path, 3)
    batch = AtomicBatch()
    batch.stage(paths[0], b"new\n")
    with pytest.raises(FileNotFoundError):
        batch.stage(tmp_path / "no-such-dir" / "file", b"new\n")
    batch.abandon()
    assert len(batch) == 0
    assert contents(tmp_path) == {p.name: b"old\n" for p in paths}  # the staged .tmp removed too


def test_discard_drops_one_staged_file(tmp_path: Path) -> None:
    first, second = make_files(tmp_path, 2)
    batch = AtomicBatch()
    batch.stage(first, b"new\n")
    batch.stage(second, b"new\n")
    batch.sync()
    batch.discard(first)
    batch.commit(second)
    batch.finish()
    assert contents(tmp_path) == {first.name: b"old\n", second.name: b"new\n"}


def test_sync_file_system_names_the_dir_it_cannot_open(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        sync_file_system(tmp_path / "missing")
    sync_file_system(tmp_path)


@pytest.mark.slow
def test_sigkill_at_random_moments_leaves_every_file_one_rounds_content(tmp_path: Path) -> None:
    """A real writer process rewriting 300 files a batch, killed 15 times at random moments."""
    names = [f"file-{n}" for n in range(300)]
    for name in names:
        (tmp_path / name).write_bytes(content_for(name, 0))
    rng = random.Random(20261125)
    rounds_seen = set()
    for run in range(15):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.service.storage.batch_writer", str(tmp_path)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        time.sleep(rng.uniform(0.3, 0.8))
        proc.send_signal(signal.SIGKILL)
        _, stderr = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL, stderr.decode()
        for name in names:
            data = (tmp_path / name).read_bytes()
            match = re.match(rf"{name} round (\d+)\n".encode(), data)
            assert match is not None, f"run {run}: {name} holds {data[:60]!r}"
            assert data == content_for(name, int(match.group(1))), f"run {run}: {name} is torn"
            rounds_seen.add(int(match.group(1)))
    assert len(rounds_seen) > 1  # the writer got past its first round at least once

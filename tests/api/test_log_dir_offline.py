"""A full disk on the produce path, on a real server with two log dirs.

The first dir is a 1 MiB tmpfs where the platform lets us mount one (root on Linux), else a plain dir whose
writes fail with ENOSPC once armed (injected at ``os.pwrite``). The produce that meets the full disk
takes that dir offline at once: it and every later produce to it answer 503 naming the dir; the topic stays
listed with the partition marked offline; ``/readyz`` stays 200 and lists the dir; the other dir goes on;
after a restart with room again, every acknowledged record is there.
"""

from __future__ import annotations

import base64
import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.api.conftest import assert_problem, serve_daemon, string_record

VALUE = "v" * 1000


class FullDisk:
    """The log dir that fills up: a real small tmpfs, or ENOSPC injected for files under it."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.path = path
        # LOGCLEANER_TEST_NO_TMPFS=1 runs the injected variant where a tmpfs could be mounted.
        self.is_tmpfs = not os.environ.get("LOGCLEANER_TEST_NO_TMPFS") and _mount_tmpfs(path, "size=1m")
        self._monkeypatch = monkeypatch
        self._armed = False
        if not self.is_tmpfs:
            monkeypatch.setattr(os, "pwrite", self._pwrite(os.pwrite))

    def fill(self) -> None:
        """From now on writes to the dir fail (on tmpfs: they will once it is full)."""
        self._armed = True

    def make_room(self) -> None:
        if self.is_tmpfs:
            _mount_tmpfs(self.path, "remount,size=64m")
        self._armed = False

    def unmount(self) -> None:
        if self.is_tmpfs:
            subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True)

    def _pwrite(self, real: Callable[[int, bytes, int], int]) -> Callable[[int, bytes, int], int]:
        def pwrite(fd: int, data: bytes, offset: int) -> int:
            if self._armed and os.readlink(f"/proc/self/fd/{fd}").startswith(f"{self.path.resolve()}/"):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd, data, offset)

        return pwrite


def _mount_tmpfs(path: Path, options: str) -> bool:
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=False, capture_output=True
        )
    except OSError:
        return False
    return done.returncode == 0


@pytest.fixture
def full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FullDisk]:
    path = tmp_path / "full"
    path.mkdir()
    disk = FullDisk(path, monkeypatch)
    try:
        yield disk
    finally:
        disk.unmount()


def test_a_full_disk_takes_its_dir_offline_and_the_rest_goes_on(tmp_path: Path, full_disk: FullDisk) -> None:
    full, healthy = full_disk.path.resolve(), (tmp_path / "healthy").resolve()
    acked: list[tuple[int, str]] = []
    with serve_daemon(full, {"log.dirs": f"{full},{healthy}"}) as served:
        client = served.client
        assert client.post("/v1/topics", json={"name": "t", "partitions": 2}).status_code == 201
        placed = {p["log_dir"]: p["partition"] for p in client.get("/v1/topics/t").json()["partitions"]}
        on_full, on_healthy = placed[str(full)], placed[str(healthy)]
        path = f"/v1/topics/t/partitions/{on_full}/records"

        for round_ in range(2000):  # fills a 1 MiB tmpfs in well under 2000 requests
            if round_ == 3:
                full_disk.fill()
            values = [f"{round_}-{i}-{VALUE}" for i in range(20)]
            response = client.post(path, json={"records": [string_record(None, v) for v in values]})
            if response.status_code != 200:
                break
            acked.extend(zip(response.json()["offsets"], values, strict=True))
        assert acked, "some records went in before the disk filled"

        problem = assert_problem(response, 503)
        assert str(full) in str(problem["detail"]) and "offline" in str(problem["detail"])
        one = {"records": [string_record(None, "x")]}
        assert str(full) in str(assert_problem(client.post(path, json=one), 503)["detail"])
        assert_problem(client.get(path, params={"offset": 0}), 503)
        other = client.post(f"/v1/topics/t/partitions/{on_healthy}/records", json=one)
        assert other.status_code == 200, other.text

        assert client.get("/v1/topics").json()["topics"] == [
            {"name": "t", "partitions": 2, "offline_partitions": [on_full]}
        ]
        detail = {p["partition"]: p for p in client.get("/v1/topics/t").json()["partitions"]}
        assert detail[on_full]["offline"] is True and "offline" not in detail[on_healthy]
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json() == {
            "status": "ready",
            "offline_log_dirs": [str(full)],
        }

    full_disk.make_room()
    with serve_daemon(full, {"log.dirs": f"{full},{healthy}"}) as served:
        assert served.client.get("/readyz").json() == {"status": "ready"}
        fetched = served.client.get(
            f"/v1/topics/t/partitions/{on_full}/records", params={"offset": 0, "max_records": 10_000}
        )
        assert fetched.status_code == 200, fetched.text
        stored = {
            r["offset"]: base64.b64decode(r["value"]["data"]).decode() for r in fetched.json()["records"]
        }
        for offset, value in acked:
            assert stored.get(offset) == value, f"acknowledged offset {offset} lost"

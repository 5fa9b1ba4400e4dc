"""``service.core.cpus``: the CPUs this process may keep busy, a cgroup CPU quota included (v1 and v2), read
from cgroup trees written under a temporary folder as the kernel lays them out, and from this machine's
own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from service.core.cpus import cgroup_cpu_limit, usable_cpus
from tests.paths import REPO


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def limit(tmp_path: Path, proc_cgroup: str) -> int | None:
    write(tmp_path / "proc-cgroup", proc_cgroup)
    return cgroup_cpu_limit(proc_cgroup=tmp_path / "proc-cgroup", cgroup_root=tmp_path / "cgroup")


def test_a_v2_quota_counts_in_whole_cpus_rounded_up(tmp_path: Path) -> None:
    write(tmp_path / "cgroup" / "cpu.max", "150000 100000\n")  # a container's --cpus 1.5
    assert limit(tmp_path, "0::/\n") == 2


def test_the_lowest_quota_of_the_cgroup_and_its_ancestors_wins(tmp_path: Path) -> None:
    write(tmp_path / "cgroup" / "system.slice" / "logcleaner.service" / "cpu.max", "max 100000\n")
    write(tmp_path / "cgroup" / "system.slice" / "cpu.max", "100000 100000\n")
    write(tmp_path / "cgroup" / "cpu.max", "400000 100000\n")
    assert limit(tmp_path, "0::/system.slice/logcleaner.service\n") == 1


def test_v1_reads_the_cpu_controllers_quota_and_period(tmp_path: Path) -> None:
    docker = tmp_path / "cgroup" / "cpu,cpuacct" / "docker" / "abc"
    write(docker / "cpu.cfs_quota_us", "250000\n")
    write(docker / "cpu.cfs_period_us", "100000\n")
    assert limit(tmp_path, "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n") == 3


def test_a_hierarchy_mounted_at_the_containers_own_cgroup(tmp_path: Path) -> None:
    """Without a cgroup namespace /proc/self/cgroup names the host's path, which the container's mount
    does not hold: the mount's root is then the process's cgroup."""
    write(tmp_path / "cgroup" / "cpu.max", "50000 100000\n")
    assert limit(tmp_path, "0::/docker/abc\n") == 1


def test_no_quota_set_or_nothing_to_read_is_no_limit(tmp_path: Path) -> None:
    write(tmp_path / "cgroup" / "cpu.max", "max 100000\n")
    write(tmp_path / "cgroup" / "cpu" / "cpu.cfs_quota_us", "-1\n")
    write(tmp_path / "cgroup" / "cpu" / "cpu.cfs_period_us", "100000\n")
    assert limit(tmp_path, "1:cpu:/\n0::/\n") is None
    assert limit(tmp_path, "garbage\n") is None
    assert cgroup_cpu_limit(proc_cgroup=tmp_path / "missing", cgroup_root=tmp_path) is None


def test_a_cgroup_path_the_file_system_refuses_is_no_limit(tmp_path: Path) -> None:
    """An error other than "no such file" while looking (here a name too long; a sandbox's EACCES alike):
    the count falls back to the affinity mask, it never stops the service's start."""
    write(tmp_path / "cgroup" / "cpu.max", "100000 100000\n")
    assert limit(tmp_path, "0::/" + "x" * 300 + "\n") is None


def test_usable_cpus_is_the_affinity_capped_by_the_quota(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    write(tmp_path / "proc-cgroup", "0::/\n")
    write(tmp_path / "cgroup" / "cpu.max", "100000 100000\n")
    assert usable_cpus(proc_cgroup=tmp_path / "proc-cgroup", cgroup_root=tmp_path / "cgroup") == 1
    write(tmp_path / "cgroup" / "cpu.max", f"{(affinity + 3) * 100000} 100000\n")
    assert usable_cpus(proc_cgroup=tmp_path / "proc-cgroup", cgroup_root=tmp_path / "cgroup") == affinity


def test_this_machines_own_cgroups_are_read() -> None:
    """Whatever this machine sets: the affinity mask, capped by the quota found."""
    affinity = len(os.sched_getaffinity(0))
    limit_here = cgroup_cpu_limit()
    assert usable_cpus() == (affinity if limit_here is None else max(1, min(affinity, limit_here)))


def quota_cgroup(tmp_name: str) -> tuple[Path, Path] | None:
    """A new cgroup limited to one CPU (v2 ``cpu.max``, else v1's cpu controller): (its dir, its
    ``cgroup.procs``), or None where this machine does not let the test make one (not root, no writable
    cgroup file system)."""
    root = Path("/sys/fs/cgroup")
    for parent, quota_file, quota in (
        (root, "cpu.max", "100000 100000"),
        (root / "cpu", "cpu.cfs_quota_us", "100000"),
    ):
        if not (parent / quota_file).exists() and not (parent / "cgroup.controllers").exists():
            continue  # not a cgroup hierarchy (a hybrid host's /sys/fs/cgroup is a tmpfs)
        directory = parent / tmp_name
        try:
            directory.mkdir()
        except OSError:
            continue
        try:
            if not (directory / quota_file).exists():  # the kernel makes a cgroup's files; not this one
                raise OSError(f"{directory} has no {quota_file}")
            (directory / quota_file).write_text(quota)
            return directory, directory / "cgroup.procs"
        except OSError:
            directory.rmdir()
    return None


def test_a_process_in_a_cgroup_limited_to_one_cpu_may_use_one() -> None:
    """A real cgroup with a quota of one CPU: a process moved into it counts one, whatever its affinity."""
    made = quota_cgroup(f"logcleaner-test-{os.getpid()}")
    if made is None:
        pytest.skip("this machine does not let the test make a cgroup with a CPU quota (needs root)")
    directory, procs = made
    try:
        moved_then_counted = (
            "import os, pathlib, sys\n"
            "pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))\n"
            "from service.core.cpus import usable_cpus\n"
            "print(usable_cpus())\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", moved_then_counted, str(procs)],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        )
    finally:
        directory.rmdir()
    assert done.stdout.strip() == "1"

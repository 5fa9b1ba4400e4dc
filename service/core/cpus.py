"""How many CPUs this process may keep busy: its affinity mask, capped by its cgroup's CPU quota.

A container started with ``--cpus 1`` or a systemd unit with ``CPUQuota=100%`` sees every CPU of its host in
its affinity mask, but the kernel throttles it to its quota (cgroup v2 ``cpu.max``, v1
``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, in its own cgroup or an ancestor's). The JVM counts the quota
too, and so Spark's ``local[*]``. A quota is rounded up to whole CPUs, as the JVM does.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["cgroup_cpu_limit", "usable_cpus"]

PROC_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cpus(*, proc_cgroup: Path = PROC_CGROUP, cgroup_root: Path = CGROUP_ROOT) -> int:
    """The CPUs of the affinity mask, at most the cgroup quota's (at least 1)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    limit = cgroup_cpu_limit(proc_cgroup=proc_cgroup, cgroup_root=cgroup_root)
    return max(1, cpus if limit is None else min(cpus, limit))


def cgroup_cpu_limit(*, proc_cgroup: Path = PROC_CGROUP, cgroup_root: Path = CGROUP_ROOT) -> int | None:
    """The lowest CPU quota of this process's cgroup and its ancestors, in whole CPUs; None where none is set
    or none can be read (no cgroups, another OS)."""
    limits: list[int] = []
    try:  # a hint only: nothing it cannot read (a sandbox's EACCES included) may stop a start
        for line in proc_cgroup.read_text().splitlines():
            parts = line.split(":", 2)
            if len(parts) != 3:
                continue
            _hierarchy, controllers, path = parts
            if not controllers:  # the v2 hierarchy
                limits += _quotas(cgroup_root, path, _v2_quota)
            elif "cpu" in controllers.split(","):  # the v1 hierarchy of the cpu controller
                mount = cgroup_root / "cpu" if (cgroup_root / "cpu").is_dir() else cgroup_root / controllers
                limits += _quotas(mount, path, _v1_quota)
    except OSError:
        return None
    return min(limits) if limits else None


def _quotas(mount: Path, path: str, quota_of: Callable[[Path], int | None]) -> list[int]:
    """The quotas set from the process's cgroup up to the hierarchy's root. Inside a container the
    hierarchy is often mounted at the container's own cgroup, where ``path`` (the host's) does not exist:
    then the mount's root is the process's cgroup."""
    directory = mount / path.lstrip("/")
    if not directory.is_dir():
        directory = mount
    found: list[int] = []
    while True:
        quota = quota_of(directory)
        if quota is not None:
            found.append(quota)
        if directory == mount or mount not in directory.parents:
            return found
        directory = directory.parent


def _v2_quota(directory: Path) -> int | None:
    """``cpu.max``: "max <period>" or "<quota> <period>" (microseconds)."""
    try:
        quota, period = (directory / "cpu.max").read_text().split()
    except (OSError, ValueError):
        return None
    return None if quota == "max" else _whole_cpus(quota, period)


def _v1_quota(directory: Path) -> int | None:
    """``cpu.cfs_quota_us`` (-1: none) over ``cpu.cfs_period_us``."""
    try:
        quota = (directory / "cpu.cfs_quota_us").read_text().strip()
        period = (directory / "cpu.cfs_period_us").read_text().strip()
    except OSError:
        return None
    return None if quota.startswith("-") else _whole_cpus(quota, period)


def _whole_cpus(quota: str, period: str) -> int | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return max(1, math.ceil(q / p)) if q > 0 and p > 0 else None

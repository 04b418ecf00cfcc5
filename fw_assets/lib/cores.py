"""How many cores this process may use: the fewer of its CPU affinity and its cgroup's CPU quota.

`os.cpu_count()` is the machine's count. In a Kubernetes pod with a CPU limit, or under `taskset`,
that is the node's (128 threads on a 16-core limit): threads beyond the limit only take turns, and
each one holds its own buffers.
"""

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")


def usable_cores(cgroup_root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> int:
    """Cores in this process's CPU affinity, capped by the CPU quota of its cgroup; at least 1."""
    cores = len(os.sched_getaffinity(0))
    quota = cgroup_cpu_quota(cgroup_root, self_cgroup)
    return max(1, min(cores, quota) if quota is not None else cores)


def cgroup_cpu_quota(cgroup_root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> int | None:
    """ceil(quota / period) of the tightest CPU limit on this process's cgroup or an ancestor:
    cgroup v2 `cpu.max` ("max 100000" or "<quota> <period>"), or v1 `cpu.cfs_quota_us` over
    `cpu.cfs_period_us` (-1: none). None when no limit is set or none can be read."""
    limits = [_limit(folder) for folder in _cgroup_folders(cgroup_root, self_cgroup)]
    return min((limit for limit in limits if limit is not None), default=None)


def _cgroup_folders(cgroup_root: Path, self_cgroup: Path) -> list[Path]:
    """The folders of this process's cgroup and its ancestors: in the v2 hierarchy, and in the v1
    hierarchy of the `cpu` controller (a container sees its own cgroup as the mount's root)."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return []
    folders = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            mounts = [cgroup_root]
        elif "cpu" in controllers.split(","):
            mounts = [cgroup_root / controllers, cgroup_root / "cpu"]
        else:
            continue
        relative = Path(path.lstrip("/"))
        folders += [mount / folder for mount in mounts for folder in (relative, *relative.parents)]
    return folders


def _limit(folder: Path) -> int | None:
    try:
        if (folder / "cpu.max").exists():
            quota, period = (folder / "cpu.max").read_text().split()
            return None if quota == "max" else math.ceil(int(quota) / int(period))
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota < 0 else math.ceil(quota / period)

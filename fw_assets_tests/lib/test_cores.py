"""Usable cores: the process's CPU affinity capped by its cgroup's CPU quota, on fake cgroup trees
(v2 `cpu.max`, v1 `cpu.cfs_quota_us`) and, in a subprocess, under `taskset`."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fw_assets.lib.cores import cgroup_cpu_quota, usable_cores

AFFINITY = len(os.sched_getaffinity(0))


def cgroup_tree(root: Path, self_cgroup: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A fake /sys/fs/cgroup under `root` holding `files`, and a fake /proc/self/cgroup."""
    for name, content in files.items():
        path = root / "sys" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    (root / "sys").mkdir(exist_ok=True)
    (root / "self_cgroup").write_text(self_cgroup)
    return root / "sys", root / "self_cgroup"


@pytest.mark.parametrize(
    ("cpu_max", "quota"),
    [("max 100000\n", None), ("200000 100000\n", 2), ("150000 100000\n", 2), ("50000 100000\n", 1),
     ("1600000 100000\n", 16)],
)
def test_a_v2_cpu_max_gives_whole_cores_rounded_up(tmp_path, cpu_max, quota):
    """What a container sees: its own cgroup as the root of the mount (Kubernetes, cgroupns)."""
    root, self_cgroup = cgroup_tree(tmp_path, "0::/\n", {"cpu.max": cpu_max})
    assert cgroup_cpu_quota(root, self_cgroup) == quota


def test_the_tightest_limit_of_the_cgroup_and_its_ancestors_counts(tmp_path):
    root, self_cgroup = cgroup_tree(
        tmp_path,
        "0::/kubepods.slice/pod1/container\n",
        {
            "kubepods.slice/cpu.max": "max 100000",
            "kubepods.slice/pod1/cpu.max": "300000 100000",
            "kubepods.slice/pod1/container/cpu.max": "800000 100000",
        },
    )
    assert cgroup_cpu_quota(root, self_cgroup) == 3


def test_a_v1_cfs_quota_counts_and_minus_one_means_no_limit(tmp_path):
    self_cgroup = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n"
    limited = {"cpu,cpuacct/cpu.cfs_quota_us": "250000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}
    assert cgroup_cpu_quota(*cgroup_tree(tmp_path / "limited", self_cgroup, limited)) == 3
    unlimited = {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}
    assert cgroup_cpu_quota(*cgroup_tree(tmp_path / "unlimited", self_cgroup, unlimited)) is None


def test_no_cgroup_files_means_no_limit(tmp_path):
    assert cgroup_cpu_quota(*cgroup_tree(tmp_path, "0::/user.slice\n", {})) is None
    assert cgroup_cpu_quota(tmp_path / "absent", tmp_path / "absent" / "cgroup") is None


def test_usable_cores_are_the_affinity_capped_by_the_quota(tmp_path):
    unlimited = cgroup_tree(tmp_path / "unlimited", "0::/\n", {"cpu.max": "max 100000"})
    assert usable_cores(*unlimited) == AFFINITY
    half_a_core = cgroup_tree(tmp_path / "half", "0::/\n", {"cpu.max": "50000 100000"})
    assert usable_cores(*half_a_core) == 1
    many = cgroup_tree(tmp_path / "many", "0::/\n", {"cpu.max": f"{100000 * (AFFINITY + 8)} 100000"})
    assert usable_cores(*many) == AFFINITY


@pytest.mark.e2e
@pytest.mark.skipif(AFFINITY < 2, reason="needs a process allowed on 2 cores to see taskset narrow it")
def test_under_taskset_duckdb_and_the_tokenizer_use_the_one_core_allowed(tmp_path):
    """`taskset -c 0`: DuckDB's threads and the tokenizer's workers follow the affinity, not the
    machine's count, and the step metadata says so."""
    code = (
        "from pathlib import Path; import sys\n"
        "from fw_assets.resources import Warehouse\n"
        "from fw_assets.tokenizing.resources import TokenizerResource\n"
        "warehouse = Warehouse(memory_limit='256MiB')\n"
        "with warehouse.connect(Path(sys.argv[1])) as con:\n"
        "    threads = con.execute(\"SELECT current_setting('threads')\").fetchone()[0]\n"
        "print(threads, TokenizerResource().worker_count(), warehouse.cores_metadata())\n"
    )
    completed = subprocess.run(
        [shutil.which("taskset"), "-c", "0", sys.executable, "-c", code, str(tmp_path)],
        capture_output=True, text=True, check=True,
    )
    assert completed.stdout.split("\n")[0] == "1 1 {'threads': 1, 'usable_cores': 1}"

"""Run one program as a whole process and measure it: wall time, CPU time, peak memory, and
optionally the bytes it wrote and the peak disk use of a folder it writes into.

Peak memory is the largest sum of resident set sizes over the process and all its descendants,
sampled every `SAMPLE_SECONDS` (datatrove and Dagster run their work in child processes). Bytes
written are the kernel's count (`write_bytes` of /proc/<pid>/io: bytes sent or dirtied for the
storage layer, page-cache writes and memory-mapped writes included) of every descendant that was
waited for, as reaping adds a child's count to its parent's. A watched folder's disk use (allocated
blocks, a hard-linked file once) is sampled every `DISK_SAMPLE_SECONDS`.
"""

import json
import os
import resource
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from bench.cases import RESULT_PREFIX

SAMPLE_SECONDS = 0.05
DISK_SAMPLE_SECONDS = 1.0


@dataclass
class Measurement:
    seconds: float
    cpu_seconds: float  # user + system of the process and every descendant it waited for
    peak_rss: int  # bytes
    facts: dict = field(default_factory=dict)  # the case's own `BENCH {...}` line
    bytes_written: int = 0  # write_bytes of the process tree (see the module docstring)
    peak_disk: int = 0  # the watched folder's largest disk use while it ran, bytes

    def as_dict(self) -> dict:
        return asdict(self)


class CaseFailed(RuntimeError):
    pass


def _sample_tree(process: psutil.Process, cpu_by_pid: dict[int, float]) -> int:
    """Resident bytes of the process tree now; records each member's CPU seconds so far."""
    total = 0
    try:
        family = [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    for member in family:
        try:
            with member.oneshot():
                total += member.memory_info().rss
                times = member.cpu_times()
            cpu_by_pid[member.pid] = times.user + times.system
        except psutil.NoSuchProcess:
            pass  # ended between listing and reading
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _bytes_written() -> int:
    """write_bytes of this process: its own and those of every descendant reaped so far."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["write_bytes"])


def disk_use(folder: Path, seen: set | None = None) -> int:
    """Bytes allocated to the files under `folder` now, each inode once (hard links share one;
    `seen`: inodes counted already, elsewhere, and added to)."""
    seen, total = set() if seen is None else seen, 0
    for directory, _, names in os.walk(folder):
        for name in names:
            try:
                status = os.lstat(os.path.join(directory, name))
            except FileNotFoundError:
                continue  # removed while walking
            if (status.st_dev, status.st_ino) not in seen:
                seen.add((status.st_dev, status.st_ino))
                total += status.st_blocks * 512
    return total


def measure(command: list[str], log: Path, env: dict | None = None, cwd: Path | None = None,
            watch: Path | None = None) -> Measurement:
    """Run `command` to completion with its output in `log`; raise CaseFailed if it fails.
    `watch`: a folder whose peak disk use is sampled while it runs."""
    log.parent.mkdir(parents=True, exist_ok=True)
    cpu_before, written_before = _children_cpu(), _bytes_written()
    peak_disk = disk_use(watch) if watch else 0
    with open(log, "w") as output:
        started = time.perf_counter()
        process = psutil.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        peak = 0
        cpu_by_pid: dict[int, float] = {}
        disk_sampled = started
        while process.poll() is None:
            peak = max(peak, _sample_tree(process, cpu_by_pid))
            if watch and time.perf_counter() - disk_sampled >= DISK_SAMPLE_SECONDS:
                peak_disk, disk_sampled = max(peak_disk, disk_use(watch)), time.perf_counter()
            time.sleep(SAMPLE_SECONDS)
        seconds = time.perf_counter() - started
    peak_disk = max(peak_disk, disk_use(watch)) if watch else 0
    # Descendants that were waited for are in RUSAGE_CHILDREN; those that were not (datatrove's
    # forkserver workers) only in the samples, less their last SAMPLE_SECONDS.
    cpu = max(_children_cpu() - cpu_before, sum(cpu_by_pid.values()))
    text = log.read_text(errors="replace")
    if process.returncode != 0:
        tail = "\n".join(text.splitlines()[-25:])
        raise CaseFailed(f"{' '.join(command)} exited with {process.returncode}; log {log}:\n{tail}")
    facts = {}
    for line in text.splitlines():
        if line.startswith(RESULT_PREFIX):
            facts = json.loads(line[len(RESULT_PREFIX) :])
    return Measurement(seconds=seconds, cpu_seconds=cpu, peak_rss=peak, facts=facts,
                       bytes_written=_bytes_written() - written_before, peak_disk=peak_disk)


def combine(parts: list[Measurement]) -> Measurement:
    """Processes run one after the other: times add up, the peak is the largest."""
    facts: dict = {}
    for part in parts:
        facts.update(part.facts)
    return Measurement(
        seconds=sum(p.seconds for p in parts),
        cpu_seconds=sum(p.cpu_seconds for p in parts),
        peak_rss=max(p.peak_rss for p in parts),
        facts=facts,
        bytes_written=sum(p.bytes_written for p in parts),
        peak_disk=max(p.peak_disk for p in parts),
    )

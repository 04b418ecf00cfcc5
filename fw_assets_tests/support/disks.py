"""Real small filesystems for full and read-only output disks (tmpfs mounts; needs root)."""

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def mount(*arguments: str) -> None:
    """`mount` as root; the test is skipped where the sandbox cannot mount."""
    result = subprocess.run(["mount", *arguments], capture_output=True, text=True)
    if result.returncode:
        pytest.skip(f"cannot mount a test filesystem here ({result.stderr.strip()}): needs root")


@contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A filesystem of its own of `size` (`2m`, `64m`) at `folder`, unmounted afterwards: for full
    and read-only disks (`mount("-o", "remount,ro", str(folder))`)."""
    folder.mkdir(exist_ok=True)
    mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill_disk(disk: Path, leave: int) -> Path:
    """Fill the filesystem of `disk` but `leave` bytes with a file, returned (unlink it to free)."""
    filler = disk / "filler"
    with open(filler, "wb") as handle:
        handle.write(b"\0" * max(shutil.disk_usage(disk).free - leave, 0))
    return filler

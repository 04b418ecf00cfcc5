"""A folder the whole test session makes once, whichever pytest-xdist worker asks first: the others
wait for it and read what it made (each worker would otherwise run the same chain again)."""

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder `name`, filled by `make(folder)` once for the session. Under xdist it lies in the
    temp folder the workers of this session share, and a lock makes the others wait for the first;
    a folder whose maker failed is made again by the next to ask."""
    base = tmp_path_factory.getbasetemp()
    if base.name == f"popen-{os.environ.get('PYTEST_XDIST_WORKER')}":
        base = base.parent  # pytest-N/, beside each worker's popen-gwN/ (not a pytest a test started)
    folder, made = base / name, base / f"{name}.made"
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            made.touch()
    return folder

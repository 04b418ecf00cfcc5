"""The README's commands work as a new user copies them: in the operating shell it prints (venv
activated, DAGSTER_HOME=$PWD, in the repository's root)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.dagster_services import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()
BIN = Path(sys.executable).parent


def operating_shell() -> list[str]:
    """The lines of the block the 'Running it' section asks every shell to run first."""
    section = README.split("## Running it", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_operating_shell_sets_dagster_home_to_the_repository_root():
    assert "export DAGSTER_HOME=$PWD" in operating_shell()
    assert "source .venv/bin/activate" in operating_shell()


def printed_sensor_preview() -> str:
    return re.search(r"`(dagster sensor preview [^`]+)`", README).group(1)


@pytest.mark.e2e
def test_the_printed_sensor_preview_runs_in_the_operating_shell(tmp_path):
    """`dagster sensor preview` reads the instance: without DAGSTER_HOME it refuses to start, with
    the operating shell's it previews the sensor on the repository's own dagster.yaml."""
    checkout = tmp_path / "fw_assets"  # a clone's root: what the commands read from it
    checkout.mkdir()
    for name in ("dagster.yaml", "workspace.yaml"):
        shutil.copy(REPO_ROOT / name, checkout / name)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "DAGSTER_HOME": str(checkout),
           "FW_SOURCE_DIR": str(tmp_path / "source")}
    command = printed_sensor_preview()
    done = subprocess.run(command, shell=True, cwd=checkout, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "new_dumps" in done.stdout + done.stderr
    assert (checkout / ".dagster").is_dir(), "the history goes where the repository's dagster.yaml says"

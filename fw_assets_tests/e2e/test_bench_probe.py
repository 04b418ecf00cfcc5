"""`python -m bench.probe` runs end to end on a small dump, so the probe's benchmark cannot rot."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_the_probe_benchmark_measures_tokenized_and_the_builtin_probe():
    completed = subprocess.run(
        [sys.executable, "-m", "bench.probe", "--rows", "3000", "--max-tokens", "64"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    rows = [line for line in completed.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == "| step | documents | wall s | CPU s | documents / CPU s |"
    assert any(r.startswith("| tokenized (cl100k, 1 worker) |") for r in rows)
    assert any(r.startswith("| probe_loss, built-in bigram |") for r in rows)

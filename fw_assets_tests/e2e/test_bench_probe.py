"""`python -m bench.probe` and `python -m bench.probe_model` run end to end at a small size, so the
probe's benchmarks cannot rot."""

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


@pytest.mark.e2e
@pytest.mark.needs_extra("probe")
def test_the_model_probe_benchmark_prints_the_probe_beside_its_ceiling(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "bench.probe_model", "--documents", "6", "--max-tokens", "32", "--batch-tokens", "512",
         "--no-variants", "--work", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    rows = [line for line in completed.stdout.splitlines() if line.startswith("| ")]
    header, ceiling, probe = rows[-3:]
    assert header.startswith("| model | setting | dtype | layout | compiled | batch tokens | tokens | tokens/s |")
    assert probe.startswith("| gpt2-small | probe, defaults | float32 | packed | no | 512 |")
    assert ceiling.startswith("| gpt2-small | ceiling: full rows, no padding or reading |") and "| 100.0% |" in ceiling

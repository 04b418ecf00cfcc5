"""`python -m bench.celery_arrivals` runs end to end at a small size and `python -m bench.corpus_model`
reads its overheads, so the bench of the corpus on many hosts cannot rot."""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fw_assets_tests.support.postgres_server import find_postgres_binaries

REPO = Path(__file__).resolve().parents[2]


def run_bench(work: Path, results: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.celery_arrivals", "--dumps", "2", "--rows", "300", "--workers", "2",
         "--gap", "0.5", "--sensor-interval", "2", "--automation-interval", "2", "--work", str(work),
         "--results", str(results)],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )


@pytest.mark.needs_extra("celery")
def test_the_arrivals_bench_measures_every_kind_of_run_and_the_model_takes_its_overheads(tmp_path):
    if shutil.which("redis-server") is None or find_postgres_binaries() is None:
        pytest.skip("needs Debian's redis-server and postgresql: apt-get install redis-server postgresql, "
                    "as .ci/run does")
    work = Path(tempfile.mkdtemp(prefix="fw-bench-hosts-e2e-"))  # the postgres user passes through it
    work.chmod(0o755)
    try:
        completed = run_bench(work, tmp_path / "results")
        left = list(work.iterdir())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert not left, f"the deployment's folders are left behind: {left}"

    rows = completed.stdout.splitlines()
    (whole,) = [rows[i + 2] for i, row in enumerate(rows) if row.startswith("| wall s |")]
    cells = [cell.strip() for cell in whole.strip("|").split("|")]
    runs, failed = cells[9], cells[10]
    signing, decisions, scoring = map(int, runs.split("(")[1].rstrip(")").split(","))
    assert (signing, scoring, failed) == (2, 2, "0") and decisions >= 2, whole  # the deployment's own e2e tests
    # (test_arrival_orders.py) hold it to one decisions run per dump
    for step in ("raw", "minhash", "band_key_index", "deduplicated", "tokenized", "probe_loss"):
        assert any(row.startswith(f"| step `{step}` |") for row in rows), step
    assert any(row.startswith("| start latency: a free worker to the run's start |") for row in rows)

    (result,) = (tmp_path / "results").glob("celery-arrivals-*.json")
    overheads = json.loads(result.read_text())["overheads"]
    assert overheads["start_latency"] > 0 and overheads["first_request"] > 0
    model = subprocess.run(
        [sys.executable, "-m", "bench.corpus_model", "--hosts", "2x4", "--runs-per-host", "1",
         "--overheads", str(result)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert model.returncode == 0, model.stderr[-3000:]
    assert f"start_latency={overheads['start_latency']}" in model.stdout
    assert sum(row.startswith("| 2 × 4 | 1 × 4 |") for row in model.stdout.splitlines()) == 2

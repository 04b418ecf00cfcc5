"""The benchmark command (`python -m bench.run`) runs end to end on a tiny data set, so it
cannot rot unnoticed: cases run as processes, the table and the cross-checks are printed."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.e2e
def test_bench_command_measures_and_cross_checks_the_bucketing_cases(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "bench.run", "--rows", "3000", "--files", "2", "--dumps", "1",
         "--runs", "1", "--groups", "bucketing", "--cases", "fw_sql,floor,floor_partitioned,datatrove",
         "--work", str(tmp_path / "work"), "--results", str(tmp_path / "results")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    out = completed.stdout
    assert "| case | docs in |" in out
    assert "| fw_sql time ÷ floor time |" in out
    # the data's shape, which moves the ratio to datatrove: 2 files of 1,500 rows in 1,000-row groups
    (shape,) = [line for line in out.splitlines() if line.startswith("| CC-MAIN-2013-20 |")]
    assert shape.startswith("| CC-MAIN-2013-20 | 2 | 3,000 | 1,500–1,500 | 2–2 | 1,000 |")
    assert "rows written, floor vs fw_sql" in out and "(same)" in out and "DIFFERENT" not in out
    if importlib.util.find_spec("datatrove"):
        assert "ids per bucket and dump, fw_sql vs datatrove: identical" in out
    else:
        assert "datatrove is not installed" in out
    (report,) = (tmp_path / "results").glob("*.md")
    assert "| case | docs in |" in report.read_text()


@pytest.mark.e2e
def test_bench_fixed_group_measures_imports_and_an_empty_dagster_run(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "bench.run", "--rows", "3000", "--files", "2", "--dumps", "1",
         "--runs", "1", "--groups", "fixed",
         "--work", str(tmp_path / "work"), "--results", str(tmp_path / "results")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    rows = [line for line in completed.stdout.splitlines() if line.startswith("| ")]
    for label in ("import dagster", "import fw_assets.definitions", "an empty asset"):
        assert any(label in row for row in rows), label

"""Untimed preparation, cached under `bench/work/prepared/<data key>/`:

- how many rows the sampler of record keeps, and the floor's `hash(id)` threshold that keeps
  exactly as many;
- a published bucketed output with its dedup decisions (the chain run once through Dagster) for
  the tokenizing cases.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.data import DataSpec, dump_files, quiet_duckdb
from fw_assets.bucketing.sample_and_bucket import selection_counts, write_selection
from fw_assets.lib.progress import ProgressReporter
from fw_assets.lib.versions import code_version
from fw_assets.sampling_policy import SEED_POLICY

REPO = Path(__file__).resolve().parents[1]

FLOOR_THRESHOLD_SQL = """
SELECT max(h) FROM (
    SELECT hash(id) AS h FROM read_parquet($files) ORDER BY h LIMIT $kept
)
"""


def prepared_dir(work: Path, spec: DataSpec) -> Path:
    return work / "prepared" / spec.key


def floor_threshold(work: Path, spec: DataSpec, dumps: tuple[str, ...]) -> dict:
    """Rows kept by the sampler in `dumps`, and T such that `hash(id) <= T` keeps as many."""
    key = f"{'+'.join(dumps)}-{code_version(sql=['select_sample'], policy=SEED_POLICY)}"
    cache = prepared_dir(work, spec) / "floor.json"
    cached = json.loads(cache.read_text()) if cache.exists() else {}
    if key in cached:
        return cached[key]
    files = [f for dump in dumps for f in dump_files(work, spec, dump)]
    scratch = prepared_dir(work, spec) / "selection-scratch.parquet"
    scratch.parent.mkdir(parents=True, exist_ok=True)
    with quiet_duckdb() as con:
        kept = 0
        for dump in dumps:
            write_selection(con, dump_files(work, spec, dump), scratch, SEED_POLICY, ProgressReporter(print, dump, 0))
            kept += sum(k for _, k in selection_counts(con, scratch).values())
        (threshold,) = con.execute(FLOOR_THRESHOLD_SQL, {"files": files, "kept": kept}).fetchone()
        (floor_kept,) = con.execute(
            "SELECT count(*) FROM read_parquet($files) WHERE hash(id) <= $t", {"files": files, "t": threshold}
        ).fetchone()
    scratch.unlink()
    if floor_kept != kept:
        raise RuntimeError(f"floor threshold keeps {floor_kept:,} rows, the sampler {kept:,}: hash collision?")
    cached[key] = {"kept": kept, "threshold": int(threshold)}
    cache.write_text(json.dumps(cached, indent=1))
    return cached[key]


def dagster_home(folder: Path) -> Path:
    """A fresh DAGSTER_HOME holding this repo's dagster.yaml (its storage paths are relative to
    the folder Dagster starts in, so commands run with this folder as working directory)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(REPO / "dagster.yaml", folder / "dagster.yaml")
    return folder


def dagster_command(select: str, dump: str) -> list[str]:
    return [
        sys.executable, "-m", "dagster", "asset", "materialize",
        "-m", "fw_assets.definitions", "--select", select, "--partition", dump,
    ]


def dagster_env(source_root: Path, output_root: Path, home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "FW_SOURCE_DIR": str(source_root.resolve()),
        "FW_OUTPUT_DIR": str(output_root.resolve()),
        "DAGSTER_HOME": str(home.resolve()),
    }


def published_buckets(work: Path, spec: DataSpec, source_root: Path, dump: str) -> Path:
    """An output root where the chain has published `dump` (en/<bucket>/<dump>/) and its dedup
    decisions (which `tokenized` reads), made once."""
    root = prepared_dir(work, spec) / f"published-dedup-{code_version(sql=['select_sample', 'write_buckets'])}"
    marker = root / f".complete-{dump}"
    if marker.exists():
        return root
    print(f"preparing the bucketed output of {dump} for the tokenizing cases (untimed) ...", flush=True)
    _run_dagster("raw,sampled,bucketed,minhash,deduplicated", dump, source_root, root, root / ".dagster-home")
    marker.touch()
    return root


def _run_dagster(select: str, dump: str, source_root: Path, output_root: Path, home: Path) -> None:
    """Materialize `select` for `dump` through the CLI in a fresh DAGSTER_HOME, or raise with its output."""
    home = dagster_home(home)
    completed = subprocess.run(
        dagster_command(select, dump), env=dagster_env(source_root, output_root, home), cwd=home,
        capture_output=True, text=True,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"preparing {dump} failed:\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}")

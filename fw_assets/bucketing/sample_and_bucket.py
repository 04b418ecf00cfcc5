"""The DuckDB work of each step, apart from Dagster so tests and benchmarks call it directly."""

from pathlib import Path

import duckdb
import pyarrow as pa

from fw_assets.lib.progress import ProgressReporter, run_with_progress
from fw_assets.lib.sql import load_sql
from fw_assets.sampling_policy import SamplingPolicy

# The statements run here, for the code versions of the assets calling these steps.
STEPS_SQL = ("select_sample", "selection_counts", "write_buckets", "bucket_counts")


def write_selection(
    con: duckdb.DuckDBPyConnection,
    files: list[str],
    selection: Path,
    policy: SamplingPolicy,
    reporter: ProgressReporter,
) -> None:
    """Decide bucket and keep/drop for every row of `files`; write the decisions to `selection`."""
    con.register("policy", pa.Table.from_pylist(policy.rows()))
    run_with_progress(
        con, load_sql("select_sample"), {"files": files, "selection": str(selection)}, reporter
    )


def selection_counts(con: duckdb.DuckDBPyConnection, selection: Path) -> dict[str | None, tuple[int, int]]:
    """Rows in and rows kept per bucket (None: below every bucket)."""
    rows = con.execute(load_sql("selection_counts"), {"selection": str(selection)}).fetchall()
    return {bucket: (rows_in, kept) for bucket, rows_in, kept in rows}


def write_buckets(
    con: duckdb.DuckDBPyConnection,
    files: list[str],
    selection: Path,
    out_dir: Path,
    reporter: ProgressReporter,
) -> dict[str, Path]:
    """Write the selected rows of `files` as `out_dir/bucket=<name>/`; return the folders written."""
    run_with_progress(
        con,
        load_sql("write_buckets"),
        {"files": files, "selection": str(selection), "staging": str(out_dir)},
        reporter,
    )
    return {p.name.removeprefix("bucket="): p for p in sorted(out_dir.glob("bucket=*"))}


def bucket_stats(con: duckdb.DuckDBPyConnection, folders: dict[str, Path]) -> dict[str, dict]:
    """Rows, files and bytes of each written bucket folder."""
    files = [str(p) for folder in folders.values() for p in sorted(folder.glob("*.parquet"))]
    if not files:
        return {}
    counts = con.execute(load_sql("bucket_counts"), {"files": files}).fetchall()
    return {
        bucket: {
            "rows": rows,
            "files": file_count,
            "bytes": sum(p.stat().st_size for p in folders[bucket].glob("*.parquet")),
        }
        for bucket, rows, file_count in counts
    }

"""Cross-checks between cases' outputs: the same ids per bucket and dump, the same row counts."""

from collections.abc import Callable
from pathlib import Path

from bench.data import quiet_duckdb
from fw_assets.paths import bucket_dump_dir
from fw_assets.sampling_policy import SEED_POLICY

FilesOf = Callable[[str, str], list[str]]  # (bucket, dump) -> parquet files

COMPARE_SQL = """
WITH a AS (SELECT id FROM read_parquet($a)), b AS (SELECT id FROM read_parquet($b))
SELECT
    (SELECT count(*) FROM a),
    (SELECT count(*) FROM b),
    (SELECT count(*) FROM (SELECT id FROM a EXCEPT SELECT id FROM b)),
    (SELECT count(*) FROM (SELECT id FROM b EXCEPT SELECT id FROM a))
"""


def published_layout(root: Path) -> FilesOf:
    """`en/<bucket>/<dump>/*.parquet`: the published layout, fw_assets' and the seed's."""
    return lambda bucket, dump: sorted(str(p) for p in bucket_dump_dir(root, bucket, dump).glob("*.parquet"))


def staging_layout(root: Path) -> FilesOf:
    """`buckets/<dump>/bucket=<bucket>/*.parquet`: what `write_buckets` writes before publishing."""
    return lambda bucket, dump: sorted(
        str(p) for p in (root / "buckets" / dump / f"bucket={bucket}").glob("*.parquet")
    )


def compare_ids(a: FilesOf, b: FilesOf, dumps: tuple[str, ...]) -> tuple[int, list[str]]:
    """Rows compared, and one line per (bucket, dump) where the two id sets differ."""
    problems, compared = [], 0
    with quiet_duckdb() as con:
        for dump in dumps:
            for bucket in (b.name for b in SEED_POLICY.buckets):
                files_a, files_b = a(bucket, dump), b(bucket, dump)
                if not files_a or not files_b:
                    if files_a or files_b:
                        problems.append(f"{bucket}/{dump}: files on one side only")
                    continue
                rows_a, rows_b, only_a, only_b = con.execute(COMPARE_SQL, {"a": files_a, "b": files_b}).fetchone()
                compared += rows_a
                if rows_a != rows_b or only_a or only_b:
                    problems.append(
                        f"{bucket}/{dump}: {rows_a:,} vs {rows_b:,} rows, {only_a:,} ids only in the "
                        f"first, {only_b:,} only in the second"
                    )
    return compared, problems


def parquet_rows(folder: Path) -> int:
    """Rows of every parquet file under `folder`, from the footers."""
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(p).num_rows for p in folder.rglob("*.parquet"))

"""The floor: one DuckDB COPY over the same files, writing the same number of rows, zstd.

    python -m bench.cases.floor --source ROOT --out DIR --dumps D1 D2 --threshold T [--partitions 4]

Without `--partitions` each thread writes its own file: nothing DuckDB does is faster. With it,
the rows go to that many hive folders like the bucketed output (same partitioned writer).
The keep predicate `hash(id) <= T` is as cheap as a predicate gets; the harness picks T so that
it keeps exactly as many rows as the sampler of record. Same connection settings as fw_assets, and
the same parquet options as `sql/write_buckets.sql` (read from it, so the two cannot drift).
"""

import argparse
import re
from pathlib import Path

from bench.cases import report
from bench.cases.fw_sql import dump_inputs
from fw_assets.lib.sql import load_sql
from fw_assets.resources import Warehouse

# The fastest way DuckDB writes rows: every thread its own file.
FLOOR_SQL = """
COPY (
    SELECT id, text, score
    FROM read_parquet($files)
    WHERE hash(id) <= $threshold
) TO $out (FORMAT parquet, COMPRESSION zstd, PER_THREAD_OUTPUT true{options})
"""
# The same rows in as many hive partitions as there are buckets, keyed on something trivial.
PARTITIONED_FLOOR_SQL = """
COPY (
    SELECT id, text, score, hash(id) % $partitions AS part
    FROM read_parquet($files)
    WHERE hash(id) <= $threshold
) TO $out (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (part){options})
"""


def bucket_write_options() -> str:
    """ROW_GROUP_SIZE, ROW_GROUP_SIZE_BYTES and COMPRESSION_LEVEL as `write_buckets.sql` sets them."""
    sql = load_sql("write_buckets")
    found = re.findall(r"^\s*((?:ROW_GROUP_SIZE(?:_BYTES)?|COMPRESSION_LEVEL)\s+\d+)", sql, re.MULTILINE)
    return "".join(f", {option}" for option in found)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cases.floor")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dumps", nargs="+", required=True)
    parser.add_argument("--threshold", type=int, required=True)
    parser.add_argument("--partitions", type=int, default=0, help="0: per-thread files")
    args = parser.parse_args(argv)

    files = dump_inputs(args.source, args.dumps, "all")["all"]
    args.out.mkdir(parents=True, exist_ok=True)
    with Warehouse().connect(args.out / ".spill") as con:
        parameters = {"files": files, "threshold": args.threshold, "out": str(args.out / "floor")}
        if args.partitions:
            sql = PARTITIONED_FLOOR_SQL
            parameters["partitions"] = args.partitions
        else:
            sql = FLOOR_SQL
        con.execute(sql.format(options=bucket_write_options()), parameters)
    report(files=len(files), partitions=args.partitions, options=bucket_write_options())


if __name__ == "__main__":
    main()

"""What a dump looks like to the bucketing chain: the facts that move its speed against the seed's
datatrove pipeline, for any folder of FineWeb-Edu parquet files.

    python -m bench.data_shape DUMP_FOLDER [DUMP_FOLDER ...]

Per dump: files and rows per file (datatrove runs one task per file, so on 2 workers an odd
number of files leaves a worker idle for the last one), row groups and rows per row group (DuckDB
parallelises over row groups), the text's length in bytes and how many texts hold a character
outside ASCII (Python decodes and encodes those more slowly than ASCII; DuckDB does not care),
compressed bytes per row and the codec, and the score's quantiles with the share the seed's
sampler keeps. Reads the footers and the score, text and id columns once (DuckDB).
"""

import argparse
import json
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from bench.data import quiet_duckdb
from fw_assets.bucketing.sample_and_bucket import selection_counts, write_selection
from fw_assets.formats.manifest import source_files
from fw_assets.lib.progress import ProgressReporter
from fw_assets.sampling_policy import SEED_POLICY

SHAPE_SQL = """
SELECT
    count(*)                                                AS rows,
    sum(strlen(text))                                       AS text_bytes,
    quantile_cont(strlen(text), [0.1, 0.5, 0.9, 0.99])      AS text_bytes_p10_50_90_99,
    avg((strlen(text) > length(text))::INT)                 AS non_ascii_share,
    quantile_cont(score, [0.25, 0.5, 0.75, 0.9, 0.99])      AS score_p25_50_75_90_99,
    avg(score)                                              AS score_mean
FROM read_parquet($files)
"""


def dump_shape(folder: Path) -> dict:
    files = [str(p) for p in source_files(folder)]
    footers = [pq.ParquetFile(f).metadata for f in files]
    groups = [m.num_row_groups for m in footers]
    rows_per_group = [m.row_group(g).num_rows for m in footers for g in range(m.num_row_groups)]
    with quiet_duckdb() as con:
        cursor = con.execute(SHAPE_SQL, {"files": files})
        names, (values,) = [c[0] for c in cursor.description], cursor.fetchall()
        shape = dict(zip(names, values))
        kept = _kept_share(con, files)
    rows = shape["rows"]
    text_column = footers[0].schema.to_arrow_schema().get_field_index("text")
    return {
        "dump": folder.name,
        "files": len(files),
        "rows_per_file": f"{min(m.num_rows for m in footers):,}–{max(m.num_rows for m in footers):,}",
        "row_groups_per_file": f"{min(groups)}–{max(groups)}",
        "rows_per_row_group_median": sorted(rows_per_group)[len(rows_per_group) // 2],
        "codec": footers[0].row_group(0).column(text_column).compression,
        "bytes_on_disk_per_row": round(sum(Path(f).stat().st_size for f in files) / max(rows, 1)),
        **shape,
        "text_bytes_mean": round(shape["text_bytes"] / max(rows, 1)),
        "kept_share": kept,
    }


def _kept_share(con, files: list[str]) -> float:
    """The share of rows the seed's sampler keeps, by `sql/select_sample.sql` as `sampled` runs it."""
    with tempfile.TemporaryDirectory() as scratch:
        selection = Path(scratch) / "selection.parquet"
        write_selection(con, files, selection, SEED_POLICY, ProgressReporter(lambda _: None, "", 0))
        counts = selection_counts(con, selection).values()
    return round(sum(k for _, k in counts) / max(sum(n for n, _ in counts), 1), 4)


SHAPE_COLUMNS = (
    ("dump", "dump"),
    ("files", "files"),
    ("rows", "rows"),
    ("rows_per_file", "rows per file"),
    ("row_groups_per_file", "row groups per file"),
    ("rows_per_row_group_median", "rows per row group"),
    ("bytes_on_disk_per_row", "bytes on disk per row"),
    ("text_bytes_mean", "text bytes, mean"),
    ("text_bytes_p10_50_90_99", "text bytes, p10/50/90/99"),
    ("non_ascii_share", "texts not ASCII"),
    ("score_p25_50_75_90_99", "score p25/50/75/90/99"),
    ("kept_share", "kept by the sampler"),
)


def shape_table(shapes: list[dict]) -> str:
    """The shapes as one markdown table, a row per dump."""
    def number(value) -> str:
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"

    def cell(value) -> str:
        if isinstance(value, list):
            return "/".join(number(v) for v in value)
        return number(value) if isinstance(value, int | float) else str(value)

    lines = ["| " + " | ".join(label for _, label in SHAPE_COLUMNS) + " |", "|" + "---|" * len(SHAPE_COLUMNS)]
    lines += ["| " + " | ".join(cell(s[key]) for key, _ in SHAPE_COLUMNS) + " |" for s in shapes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.data_shape", description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="dump folders holding train-*.parquet")
    args = parser.parse_args(argv)
    shapes = [dump_shape(folder) for folder in args.folders]
    print(shape_table(shapes))
    print(json.dumps(shapes, default=str))


if __name__ == "__main__":
    main()

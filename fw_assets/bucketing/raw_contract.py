"""The raw FineWeb-Edu input's contract, for every file and every row of one dump.

Footers first (readable, the ten columns, their types); only a dump whose files pass them is
read, and then only its key columns: id, score, dump, file_path and int_score over every row in
one DuckDB aggregate plus one pass for duplicate ids, text nulls from the footers' statistics,
and a few sampled row groups per file for the deeper text checks. Texts are not decoded here:
bucketed's scan, which reads every text anyway to write the buckets, refuses those that are not
UTF-8 (fw_assets.bucketing.bucketed_contract.SOURCE_TEXTS).

pandas and pandera (~0.5 s of imports) are imported by the functions using them, not here: loading
the code location (the webserver, the daemon, every run) should not pay for a step's libraries.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow
import pyarrow.parquet as pq

from fw_assets.bucketing import contract_rules as rules
from fw_assets.bucketing.contract_rules import SCORE_MAX, SCORE_MIN
from fw_assets.bucketing.contract_tallies import (
    TALLY_MODULES,
    TALLY_SQL,
    duplicate_id_violations,
    fetch_tallies,
    file_name,
    rule_violations,
    text_null_violations,
    unreadable_file_violations,
)
from fw_assets.contracts.findings import CheckOutcome, ContractCheck, Violation
from fw_assets.formats.manifest import SourceFile

if TYPE_CHECKING:
    import pandas as pd

CONTRACT_SQL = ("contract_raw_rows", *TALLY_SQL)
CONTRACT_MODULES = (__name__, *TALLY_MODULES)

RAW_SCHEMA = ContractCheck(
    "schema",
    "Every shard of the dump's train-XXXXX-of-NNNNN set is present (no link to a missing file); "
    "every source file is a readable parquet file with the ten FineWeb-Edu columns and their "
    "types (read from the footers; unknown extra columns are accepted and ignored), and the "
    "dump has at least one row.",
)
RAW_KEY_COLUMNS = ContractCheck(
    "key_columns",
    "Every row, key columns decoded: id non-null and unique within the dump; score non-null, "
    "finite and within 0–6; dump equal to the partition key; file_path under `crawl-data/<dump>/`; "
    "text non-null (from the footers' null counts, scanned where a footer has none). Texts are "
    "not decoded here: bucketed's scan refuses texts that are not valid UTF-8.",
)
RAW_INT_SCORE = ContractCheck(
    "int_score",
    "Every row: int_score equals int(round(clamp(score, 0, 5))). A warning: the pipeline "
    "buckets on score and never reads int_score.",
    blocking=False,
)
RAW_TEXT_SAMPLE = ContractCheck(
    "text_sample",
    "Rows sampled from the first, middle and last row group of every file: text is not empty "
    "or whitespace-only. A warning.",
    blocking=False,
)
RAW_CHECKS = (RAW_SCHEMA, RAW_KEY_COLUMNS, RAW_INT_SCORE, RAW_TEXT_SAMPLE)

KEY_COLUMN_RULES = tuple(r for r in rules.RAW_ROW_RULES if r is not rules.INT_SCORE_MISMATCH)
SAMPLE_ROW_GROUPS = 3  # first, middle and last
SAMPLE_ROWS_PER_ROW_GROUP = 200


def check_raw(
    con: duckdb.DuckDBPyConnection,
    dump: str,
    files: Sequence[SourceFile],
    source_problems: Sequence[Violation] = (),
    *,
    with_warnings: bool = True,
) -> list[CheckOutcome]:
    """The raw contract's outcomes; the row checks run only when every file's footer passed.

    `source_problems` are what finding the files reported (missing folder, unreadable file).
    `with_warnings=False` runs only what blocks publishing (the guard before `sampled`).
    """
    schema = schema_outcome(dump, files, source_problems)
    if schema.blocks:
        return [schema]
    try:
        key_columns, int_score = row_outcomes(con, dump, files)
    except duckdb.Error:
        unreadable = unreadable_file_violations(con, [f.path for f in files])
        if not unreadable:
            raise  # not the data's fault (memory, disk): let it surface as it is
        return [schema, RAW_KEY_COLUMNS.outcome(unreadable)]
    outcomes = [schema, key_columns]
    if with_warnings:
        outcomes += [int_score, text_sample_outcome(files)]
    return outcomes


def schema_outcome(
    dump: str, files: Sequence[SourceFile], source_problems: Sequence[Violation] = ()
) -> CheckOutcome:
    """Readable files, the ten columns with their types in every footer, rows in the dump."""
    from fw_assets.bucketing.contract_frames import footer_frame, footer_violations
    from fw_assets.bucketing.contract_schemas import raw_schema

    schema = raw_schema(dump)
    violations = list(source_problems)
    for f in files:
        frame = footer_frame(Path(f.path), as_read=True)
        violations += footer_violations(schema, frame, file_name(f.path), f.rows)
    rows = sum(f.rows for f in files)
    if files and not source_problems and rows == 0:
        violations.append(Violation("no_rows", None, 0, f"the dump's {len(files)} files hold no rows"))
    empty = [file_name(f.path) for f in files if f.rows == 0]
    figures = {"files": len(files), "rows": rows, "empty_files": len(empty)}
    if empty:
        figures["empty_file_names"] = ", ".join(empty)
    return RAW_SCHEMA.outcome(violations, figures)


def row_outcomes(
    con: duckdb.DuckDBPyConnection, dump: str, files: Sequence[SourceFile]
) -> tuple[CheckOutcome, CheckOutcome]:
    """key_columns and int_score over every row, reading only the key columns."""
    paths = [f.path for f in files]
    tallies = fetch_tallies(
        con,
        "contract_raw_rows",
        {"files": paths, "dump": dump, "score_min": SCORE_MIN, "score_max": SCORE_MAX},
    )
    key_violations, int_violations = [], []
    for tally in tallies:
        key_violations += rule_violations(tally, KEY_COLUMN_RULES, dump, file_name(tally["file"]))
        int_violations += rule_violations(
            tally, [rules.INT_SCORE_MISMATCH], dump, file_name(tally["file"])
        )
    key_violations += duplicate_id_violations(con, paths, dump)
    text_nulls, scanned = text_null_violations(con, paths, dump)
    key_violations += text_nulls

    rows = sum(t["rows"] for t in tallies)
    counts = {rule.name: 0 for rule in (*KEY_COLUMN_RULES, rules.ID_DUPLICATE, rules.TEXT_NULL)}
    for v in key_violations:
        counts[v.rule] += v.rows
    key_figures = {
        "rows_checked": rows,
        "files_checked": len(paths),
        **counts,
        "files_scanned_for_text_nulls": scanned,
    }
    int_figures = {
        "rows_checked": rows,
        rules.INT_SCORE_MISMATCH.name: sum(v.rows for v in int_violations),
    }
    return (
        RAW_KEY_COLUMNS.outcome(key_violations, key_figures),
        RAW_INT_SCORE.outcome(int_violations, int_figures),
    )


def text_sample_outcome(files: Sequence[SourceFile]) -> CheckOutcome:
    """The deeper text checks (pandera) on a few row groups of every file."""
    from fw_assets.bucketing.contract_frames import row_violations
    from fw_assets.bucketing.contract_schemas import RAW_TEXT_SAMPLE_SCHEMA

    violations, sampled = [], 0
    problems = {rules.TEXT_BLANK.name: rules.TEXT_BLANK.problem}
    for f in files:
        try:
            frame = sample_rows(Path(f.path))
        except (OSError, pyarrow.ArrowException) as error:
            problem = f"cannot be read ({error}); re-download it"
            violations.append(Violation("file_unreadable", "text", 0, problem, file_name(f.path)))
            continue
        sampled += len(frame)
        if len(frame):
            violations += row_violations(RAW_TEXT_SAMPLE_SCHEMA, frame, file_name(f.path), problems)
    figures = {
        "rows_sampled": sampled,
        "files_sampled": len(files),
        rules.TEXT_BLANK.name: sum(v.rows for v in violations),
    }
    return RAW_TEXT_SAMPLE.outcome(violations, figures)


def sample_rows(path: Path) -> "pd.DataFrame":
    """id and text of the first rows of the file's first, middle and last row groups."""
    import pandas as pd

    from fw_assets.bucketing.contract_frames import plain_strings

    parquet = pq.ParquetFile(path)
    groups = parquet.num_row_groups
    chosen = sorted({0, groups // 2, groups - 1}) if groups else []
    frames = []
    for group in chosen[:SAMPLE_ROW_GROUPS]:
        batches = parquet.iter_batches(
            batch_size=SAMPLE_ROWS_PER_ROW_GROUP, row_groups=[group], columns=["id", "text"]
        )
        batch = next(batches, None)
        if batch is not None:
            batch = batch.cast(plain_strings(batch.schema))
            frames.append(batch.to_pandas(types_mapper=pd.ArrowDtype))
    if not frames:
        return pd.DataFrame({"id": [], "text": []})
    return pd.concat(frames, ignore_index=True)

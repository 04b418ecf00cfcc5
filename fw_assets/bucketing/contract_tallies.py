"""Turn the rows of `sql/contract_*.sql` tallies into violations with readable examples, and the
every-row checks the raw and bucketed contracts share: duplicate ids, null texts, and naming the
source files that cannot be read through (with the rows, for texts that are not UTF-8).

A tally row holds, for each rule, the number of failing rows in a column named after the rule
and up to five of them (structs with at least `row` and `id`) in `<rule>_examples`.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.bucketing import contract_rules as rules
from fw_assets.bucketing.contract_rules import Rule
from fw_assets.contracts.findings import MAX_EXAMPLES, Violation, count_rows, short
from fw_assets.lib.sql import load_sql

# Not a rules.Rule: pandas cannot hold such a text, so there is no pandera half to state it in.
TEXT_NOT_UTF8 = "text_not_utf8"
_UTF8_SCAN_ROWS = 1 << 16

# What every contract built on these tallies runs and reads: part of the code version of each
# asset applying one (fw_assets.lib.versions).
TALLY_SQL = (
    "contract_duplicate_ids",
    "contract_null_counts",
    "contract_text_nulls",
    "contract_read_files",
)
TALLY_MODULES = (
    "fw_assets.bucketing.contract_tallies",
    "fw_assets.contracts.findings",
    "fw_assets.bucketing.contract_frames",
    "fw_assets.bucketing.contract_schemas",
    "fw_assets.bucketing.contract_rules",
)


def fetch_tallies(
    con: duckdb.DuckDBPyConnection, statement: str, parameters: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Run `sql/<statement>.sql` and return its rows as dicts by column name."""
    cursor = con.execute(load_sql(statement), dict(parameters))
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def rule_violations(
    tally: Mapping[str, Any], checked: Sequence[Rule], dump: str, file: str | None
) -> list[Violation]:
    """One violation per rule with failing rows in this tally row."""
    violations = []
    for rule in checked:
        failing = tally[rule.name]
        if failing:
            examples = tuple(example(e, rule.column) for e in tally[f"{rule.name}_examples"] or ())
            problem = f"{count_rows(failing)} {rule.states(dump)}"
            violations.append(Violation(rule.name, rule.column, failing, problem, file, examples))
    return violations


def example(row: Mapping[str, Any], column: str) -> str:
    """`<urn:uuid:…> (row 17): score=nan`, or `row 17` when the row has no id."""
    place = f"row {row['row']}" if "row" in row else ""
    if row.get("id") is None:
        return place or "(no id)"
    label = f"{row['id']} ({place})" if place else str(row["id"])
    if column == "id" or column not in row:
        return label
    return f"{label}: {column}={short(row[column])}"


def file_name(path: str) -> str:
    return Path(path).name


def duplicate_id_violations(
    con: duckdb.DuckDBPyConnection, paths: Sequence[str], dump: str
) -> list[Violation]:
    """Ids carried by more than one row of the files, across all of them."""
    (tally,) = fetch_tallies(con, "contract_duplicate_ids", {"files": sorted(paths)})
    if not tally["ids"]:
        return []
    examples = tuple(
        f"{e['id']} ×{e['copies']} in "
        + " and ".join(dict.fromkeys(file_name(e[k]) for k in ("first_file", "last_file")))
        for e in tally["examples"]
    )
    problem = (
        f"{count_rows(tally[rules.ID_DUPLICATE.name])} {rules.ID_DUPLICATE.states(dump)} "
        f"({tally['ids']:,} distinct ids)"
    )
    rows = tally[rules.ID_DUPLICATE.name]
    return [Violation(rules.ID_DUPLICATE.name, "id", rows, problem, None, examples)]


def text_null_violations(
    con: duckdb.DuckDBPyConnection, paths: Sequence[str], dump: str
) -> tuple[list[Violation], int]:
    """Null texts in every row: the footers' null counts, and a scan of the files whose footers
    report nulls (for examples) or carry no null counts. Returns the violations and files scanned."""
    stats = fetch_tallies(con, "contract_null_counts", {"files": list(paths), "column": "text"})
    to_scan = [s["file"] for s in stats if s["nulls"] is None or s["nulls"] > 0]
    if not to_scan:
        return [], 0
    violations = []
    for tally in fetch_tallies(con, "contract_text_nulls", {"files": to_scan}):
        violations += rule_violations(tally, [rules.TEXT_NULL], dump, file_name(tally["file"]))
    return violations, len(to_scan)


def invalid_utf8_rows(path: str) -> Violation | None:
    """The rows of one file whose text is not valid UTF-8, with their row groups; arrow reads the
    bytes without judging them, one row group at a time."""
    parquet = pq.ParquetFile(path)
    rows, examples, at = 0, [], 0
    for group in range(parquet.num_row_groups):
        for batch in parquet.iter_batches(_UTF8_SCAN_ROWS, row_groups=[group], columns=["id", "text"]):
            for i, text in _invalid_utf8_texts(batch.column("text")):
                rows += 1
                if len(examples) < MAX_EXAMPLES:
                    doc_id = batch.column("id")[i].as_py()
                    examples.append(f"{doc_id} (row {at + i}, row group {group}): text={short(text[:40])}")
            at += batch.num_rows
    if not rows:
        return None
    problem = f"{count_rows(rows)} whose text is not valid UTF-8; re-export the file with UTF-8 texts"
    return Violation(TEXT_NOT_UTF8, "text", rows, problem, file_name(path), tuple(examples))


def _invalid_utf8_texts(texts: pa.Array) -> list[tuple[int, bytes]]:
    """(position, bytes) of each text of the batch that is not valid UTF-8."""
    try:
        texts.validate(full=True)
        return []
    except pa.ArrowInvalid:
        values = texts.cast(pa.large_binary()).to_pylist()
        return [(i, v) for i, v in enumerate(values) if v is not None and not _decodes(v)]


def _decodes(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _is_utf8_error(error: duckdb.Error) -> bool:
    return "not valid UTF8" in str(error)


def unreadable_file_violations(
    con: duckdb.DuckDBPyConnection, paths: Sequence[str]
) -> list[Violation]:
    """Source files DuckDB cannot decode, each with DuckDB's error (or, for texts that are not
    UTF-8, their rows). DuckDB's errors about a damaged page do not name the file, so after a
    failed read over all files each is read alone."""
    violations = []
    for path in paths:
        try:
            con.execute(load_sql("contract_read_files"), {"files": [path]}).fetchall()
        except duckdb.Error as error:
            if _is_utf8_error(error) and (not_utf8 := invalid_utf8_rows(path)):
                violations.append(not_utf8)
                continue
            problem = f"cannot be read ({error}); re-download it"
            violations.append(Violation("file_unreadable", None, 0, problem, file_name(path)))
    return violations

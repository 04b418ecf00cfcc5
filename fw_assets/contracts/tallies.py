"""Turn the rows of `sql/contract_*.sql` tallies into violations with readable examples, and the
every-row checks the raw and bucketed contracts share: duplicate ids, null texts, and naming the
source files that cannot be read through.

A tally row holds, for each rule, the number of failing rows in a column named after the rule
and up to five of them (structs with at least `row` and `id`) in `<rule>_examples`.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from fw_assets.contracts import rules
from fw_assets.contracts.findings import Violation, count_rows, short
from fw_assets.contracts.rules import Rule
from fw_assets.lib.sql import load_sql

# What every contract built on these tallies runs and reads: part of the code version of each
# asset applying one (fw_assets.lib.versions).
TALLY_SQL = (
    "contract_duplicate_ids",
    "contract_null_counts",
    "contract_text_nulls",
    "contract_read_files",
)
TALLY_MODULES = (
    "fw_assets.contracts.tallies",
    "fw_assets.contracts.findings",
    "fw_assets.contracts.frames",
    "fw_assets.contracts.schemas",
    "fw_assets.contracts.rules",
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
    (tally,) = fetch_tallies(con, "contract_duplicate_ids", {"files": list(paths)})
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


def unreadable_file_violations(
    con: duckdb.DuckDBPyConnection, paths: Sequence[str]
) -> list[Violation]:
    """Source files DuckDB cannot decode, each with DuckDB's error. DuckDB's errors about a damaged
    page do not name the file, so after a failed read over all files each is read alone."""
    violations = []
    for path in paths:
        try:
            con.execute(load_sql("contract_read_files"), {"files": [path]}).fetchall()
        except duckdb.Error as error:
            problem = f"cannot be read ({error}); re-download it"
            violations.append(Violation("file_unreadable", None, 0, problem, file_name(path)))
    return violations

"""Every-row checks that the raw and bucketed contracts share: duplicate ids, null texts, and
naming the source files that cannot be read through."""

from collections.abc import Sequence

import duckdb

from fw_assets.contracts import rules
from fw_assets.contracts.findings import Violation, count_rows
from fw_assets.contracts.tallies import fetch_tallies, file_name, rule_violations
from fw_assets.lib.sql import load_sql


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
        f"{count_rows(tally['rows'])} {rules.ID_DUPLICATE.states(dump)} "
        f"({tally['ids']:,} distinct ids)"
    )
    return [Violation(rules.ID_DUPLICATE.name, "id", tally["rows"], problem, None, examples)]


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

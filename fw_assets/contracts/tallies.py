"""Turn the rows of `sql/contract_*.sql` tallies into violations with readable examples.

A tally row holds, for each rule, the number of failing rows in a column named after the rule
and up to five of them (structs with at least `row` and `id`) in `<rule>_examples`.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from fw_assets.contracts.findings import Violation, count_rows, short
from fw_assets.contracts.rules import Rule
from fw_assets.lib.sql import load_sql


def fetch_tallies(
    con: duckdb.DuckDBPyConnection, statement: str, parameters: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Run `sql/<statement>.sql` and return its rows as dicts by column name."""
    cursor = con.execute(load_sql(statement), dict(parameters))
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def rule_violations(
    tally: Mapping[str, Any], rules: Sequence[Rule], dump: str, file: str | None
) -> list[Violation]:
    """One violation per rule with failing rows in this tally row."""
    violations = []
    for rule in rules:
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

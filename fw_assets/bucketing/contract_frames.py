"""Run the pandera schemas on what fits in memory: footer schemas and sampled rows."""

from pathlib import Path

import pandas as pd
import pandera.errors
import pandera.pandas as pa
import pyarrow
import pyarrow.parquet as pq

from fw_assets.contracts.findings import MAX_EXAMPLES, Violation, count_rows, short

# pandera's own names for its built-in column checks, as our rule suffixes.
_BUILTIN_RULES = {"not_nullable": "null", "field_uniqueness": "duplicate"}
# DuckDB reads these the same as `string`; a re-sharded copy (polars, arrow) may use them.
_STRING_LIKE = (pyarrow.large_string(), pyarrow.string_view())
_NARROW_INTEGERS = (
    pyarrow.int8(), pyarrow.int16(), pyarrow.int32(), pyarrow.uint8(), pyarrow.uint16(), pyarrow.uint32()
)


def footer_frame(path: Path, *, as_read: bool = False) -> pd.DataFrame:
    """An empty frame with the file's column names and arrow types, from its footer alone.
    `as_read`: with the types DuckDB reads the same way (see plain_strings, plain_integers)."""
    schema = pq.read_schema(path)
    if as_read:
        schema = plain_integers(plain_strings(schema))
    return schema.empty_table().to_pandas(types_mapper=pd.ArrowDtype)


def plain_strings(schema: pyarrow.Schema) -> pyarrow.Schema:
    """`schema` with large_string and string_view columns as plain string."""
    return pyarrow.schema(
        f.with_type(pyarrow.string()) if f.type in _STRING_LIKE else f for f in schema
    )


def plain_integers(schema: pyarrow.Schema) -> pyarrow.Schema:
    """`schema` with every integer column that int64 holds (int8-32, uint8-32) as int64: a
    re-export may narrow `int_score` to int32, and every statement reads it the same."""
    return pyarrow.schema(
        f.with_type(pyarrow.int64()) if f.type in _NARROW_INTEGERS else f for f in schema
    )


def footer_violations(
    schema: pa.DataFrameSchema, frame: pd.DataFrame, file: str, rows: int
) -> list[Violation]:
    """Missing, unexpected, misordered or mistyped columns of one file (`frame` from its footer)."""
    failures = failure_cases(_structure(schema), frame)
    violations = []
    for case in failures.itertuples():
        check, found = str(case.check), str(case.failure_case)
        if check == "column_in_dataframe":
            column, rule, problem = found, "column_missing", "is missing"
        elif check == "column_in_schema":
            column, rule, problem = found, "column_unexpected", "is not part of the contract"
        elif check == "column_ordered":
            order = ", ".join(schema.columns)
            column, rule, problem = found, "column_order", f"is out of order (expected {order})"
        elif check.startswith("dtype("):
            expected = _type_name(check.removeprefix("dtype('").removesuffix("')"))
            column, rule = case.column, "column_type"
            problem = f"has type {_type_name(found)}, expected {expected}"
        else:
            raise ValueError(f"unexpected footer check {check!r} on {file}")
        violations.append(Violation(rule, column, rows, f"{problem} ({count_rows(rows)})", file))
    return violations


def row_violations(
    schema: pa.DataFrameSchema, frame: pd.DataFrame, file: str, problems: dict[str, str]
) -> list[Violation]:
    """Failing rows of an in-memory `frame` per rule, with example ids; `problems` by rule name."""
    failures = failure_cases(schema, frame)
    violations = []
    for (column, check), cases in failures.groupby(["column", "check"], sort=True):
        rule = rule_name(str(column), str(check))
        rows = frame.loc[sorted(set(cases["index"]))]
        examples = tuple(
            f"{row.id}: {column}={short(row[column])}" if column != "id" else f"{row.id}"
            for _, row in rows.head(MAX_EXAMPLES).iterrows()
        )
        problem = f"{len(rows):,} of {len(frame):,} sampled rows {problems[rule]}"
        violations.append(Violation(rule, str(column), len(rows), problem, file, examples))
    return violations


def rule_name(column: str, check: str) -> str:
    """The rule a pandera failure case belongs to: its check's name, or `<column>_null` etc."""
    return f"{column}_{_BUILTIN_RULES[check]}" if check in _BUILTIN_RULES else check


def _structure(schema: pa.DataFrameSchema) -> pa.DataFrameSchema:
    """The schema's columns, types and strictness without its value checks: a footer has no rows,
    and a check reading a missing column would only repeat that it is missing."""
    bare = schema.update_columns({name: {"checks": []} for name in schema.columns})
    bare.checks = []
    return bare


def failure_cases(schema: pa.DataFrameSchema, frame: pd.DataFrame) -> pd.DataFrame:
    """pandera's failure cases of `frame` (column, check, failure_case, index), empty if none."""
    try:
        schema.validate(frame, lazy=True)
    except pandera.errors.SchemaErrors as errors:
        return errors.failure_cases
    return pd.DataFrame(columns=["column", "check", "failure_case", "index"])


def _type_name(dtype: str) -> str:
    """`double[pyarrow]` -> `double`."""
    return dtype.removesuffix("[pyarrow]")

"""Each contract rule is stated once in pandera and enforced at scale in SQL: both must flag the
same rows, and no rule may lack either half."""

import math
import re

import pandas as pd
import pyarrow.parquet as pq
import pytest

from fw_assets.bucketing import contract_rules as rules
from fw_assets.bucketing.contract_frames import failure_cases, rule_name
from fw_assets.bucketing.contract_schemas import (
    RAW_TEXT_SAMPLE_SCHEMA,
    bucketed_schema,
    raw_schema,
    selection_schema,
)
from fw_assets.bucketing.raw_contract import check_raw
from fw_assets.bucketing.sampled_contract import check_selection
from fw_assets.formats.manifest import describe
from fw_assets.lib.sql import load_sql
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.synthetic import sample_table
from fw_assets_tests.support import bad_inputs as bad
from fw_assets_tests.support.contract_cases import DUMP, OTHER_DUMP, ROWS


def failing_rows(schema, frame: pd.DataFrame) -> dict[str, int]:
    """Rows of `frame` breaking each rule it breaks (warning-level checks only warn)."""
    rows: dict[str, set] = {}
    for case in failure_cases(schema, frame).itertuples():
        rows.setdefault(rule_name(str(case.column), str(case.check)), set()).add(case.index)
    return {rule: len(indexes) for rule, indexes in rows.items()}


def test_pandera_schema_and_every_row_sql_flag_the_same_rows(con, tmp_path):
    """The raw contract is stated once in pandera and enforced at scale in SQL: they must agree."""
    table = sample_table(DUMP, 0, 50, seed=5)
    for column, values in {
        "id": {0: None, 2: table["id"][1].as_py()},
        "score": {3: None, 4: math.nan, 5: 7.5, 6: -math.inf},
        "dump": {7: OTHER_DUMP, 8: None},
        "file_path": {9: "s3://elsewhere/x.warc.gz", 10: None},
        "text": {11: None},
        "int_score": {12: None},
    }.items():
        table = bad.with_values(column, values)(table)
    path = tmp_path / "train-00000-of-00001.parquet"
    pq.write_table(table, path)

    by_sql: dict[str, int] = {}
    for violation in (v for o in check_raw(con, DUMP, [describe(path)]) for v in o.violations):
        by_sql[violation.rule] = by_sql.get(violation.rule, 0) + violation.rows
    with pytest.warns(UserWarning, match=rules.INT_SCORE_MISMATCH.name):
        by_pandera = failing_rows(raw_schema(DUMP), table.to_pandas(types_mapper=pd.ArrowDtype))
    # int_score is a warning in both: pandera warns, the SQL reports it in a non-blocking check;
    # row 12, and row 5 whose 7.5 clamps to 5
    assert by_sql.pop(rules.INT_SCORE_MISMATCH.name) == 2
    assert by_sql == by_pandera == {
        "id_null": 1, "id_duplicate": 2, "score_null": 1, "score_not_finite": 2,
        "score_out_of_range": 1, "dump_mismatch": 2, "file_path_mismatch": 2, "text_null": 1,
    }


def test_pandera_selection_schema_and_sql_flag_the_same_rows(con, clean_selection):
    table = pq.read_table(clean_selection)
    buckets = table["bucket"].to_pylist()
    mismatched = buckets.index("2.8")
    below = buckets.index(None)
    table = bad.with_values("bucket", {mismatched: "3.5"})(table)
    table = bad.with_values("keep", {below: True})(table)
    pq.write_table(table, clean_selection)

    by_sql: dict[str, int] = {}
    outcomes = check_selection(con, clean_selection, SEED_POLICY, ROWS)
    for violation in (v for o in outcomes for v in o.violations):
        if violation.rule != "sampling_ratio":  # a statistic of the whole selection, not a row rule
            by_sql[violation.rule] = by_sql.get(violation.rule, 0) + violation.rows
    by_pandera = failing_rows(selection_schema(SEED_POLICY), table.to_pandas(types_mapper=pd.ArrowDtype))
    assert by_sql == by_pandera == {"bucket_mismatch": 1, "kept_below_buckets": 1}


def pandera_rules() -> set[str]:
    """Every rule some pandera schema of the contracts checks, by its rule name."""
    schemas = [
        raw_schema(DUMP),
        RAW_TEXT_SAMPLE_SCHEMA,
        selection_schema(SEED_POLICY),
        *(bucketed_schema(bucket) for bucket in SEED_POLICY.buckets),
    ]
    named = set()
    for schema in schemas:
        named |= {check.name for check in schema.checks}
        for name, column in schema.columns.items():
            named |= {check.name for check in column.checks}
            named |= {f"{name}_null"} if not column.nullable else set()
            named |= {f"{name}_duplicate"} if column.unique else set()
    return named


ALL_RULES = [value for value in vars(rules).values() if isinstance(value, rules.Rule)]


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.name)
def test_every_rule_has_a_pandera_check_and_a_sql_count_of_its_name(rule):
    assert rule.name in pandera_rules(), f"no pandera schema checks {rule.name}"
    for statement in rule.counted_by:
        sql = load_sql(statement)
        assert re.search(rf"\bAS\s+{rule.name}\b", sql), f"sql/{statement}.sql has no {rule.name}"


def test_only_rules_on_sampled_rows_have_no_sql_count():
    assert [rule.name for rule in ALL_RULES if not rule.counted_by] == [rules.TEXT_BLANK.name]

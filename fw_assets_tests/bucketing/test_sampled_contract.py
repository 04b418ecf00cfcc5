"""The sampled selection's contract on its own, on the real files of a clean run: each check passes
on them and fails, naming rows and examples, on a copy broken in one way."""

import math

import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.bucketing import contract_rules as rules
from fw_assets.bucketing.sampled_contract import binomial_tolerance, check_selection
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets_tests.support.contract_cases import ROWS, outcome


def test_selection_passes_on_a_clean_run(con, clean_selection):
    outcomes = check_selection(con, clean_selection, SEED_POLICY, ROWS)
    assert [o.check.name for o in outcomes if not o.passed] == []
    assert outcome(outcomes, "reconciliation").figures["rows_in"] == ROWS


def test_sampling_ratio_outside_the_binomial_tolerance_fails(con, clean_selection):
    table = pq.read_table(clean_selection)
    in_3_0 = [b == "3.0" for b in table["bucket"].to_pylist()]
    keep = [True if inside else k for inside, k in zip(in_3_0, table["keep"].to_pylist())]
    pq.write_table(table.set_column(5, "keep", pa.array(keep)), clean_selection)

    ratio = outcome(check_selection(con, clean_selection, SEED_POLICY, ROWS), "sampling_ratio")
    n = sum(in_3_0)
    assert not ratio.passed
    assert ratio.figures["tolerance_3.0"] == round(binomial_tolerance(n, 0.6), 1)
    assert binomial_tolerance(n, 0.6) == 4 * math.sqrt(n * 0.6 * 0.4) + 1
    assert binomial_tolerance(n, 1.0) == 1
    (violation,) = ratio.violations
    assert violation.describe() == (
        f"bucket 3.0 kept {n:,} of {n:,} rows, expected {n * 0.6:,.1f} ± "
        f"{binomial_tolerance(n, 0.6):,.1f} at rate 0.6"
    )


def test_rows_without_a_keep_decision_or_kept_below_every_bucket_fail_reconciliation(con, clean_selection):
    table = pq.read_table(clean_selection)
    buckets = table["bucket"].to_pylist()
    undecided = [i for i, b in enumerate(buckets) if b == "3.5"][:2]
    below = [i for i, b in enumerate(buckets) if b is None][:3]
    keep = table["keep"].to_pylist()
    for i in undecided:
        keep[i] = None
    for i in below:
        keep[i] = True
    pq.write_table(table.set_column(5, "keep", pa.array(keep)), clean_selection)

    outcomes = check_selection(con, clean_selection, SEED_POLICY, ROWS + 1)
    problems = [v.describe() for v in outcome(outcomes, "reconciliation").violations]
    assert problems == [
        "column keep: 2 rows in bucket 3.5 with no keep decision",
        "column keep: 3 rows kept although their score is below every bucket",
        f"the selection holds {ROWS:,} rows, the source {ROWS + 1:,}",
    ]


def test_a_row_in_the_wrong_bucket_fails_the_selection_schema(con, clean_selection):
    table = pq.read_table(clean_selection)
    row = table["bucket"].to_pylist().index("2.8")
    buckets = table["bucket"].to_pylist()
    buckets[row] = "4.0"
    pq.write_table(table.set_column(4, "bucket", pa.array(buckets)), clean_selection)

    schema = outcome(check_selection(con, clean_selection, SEED_POLICY, ROWS), "schema")
    (violation,) = schema.violations
    assert violation.rule == rules.BUCKET_MISMATCH.name and violation.rows == 1
    assert f"{table['id'][row].as_py()} (row {table['source_row'][row].as_py()})" in violation.examples[0]
    assert "in '4.0', policy gives '2.8'" in violation.examples[0]

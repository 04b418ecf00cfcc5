"""The contracts on their own, on the real files of a clean run: each check passes on them and
fails, naming rows and examples, on a copy broken in one way."""

import math

import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.bucketing import contract_rules as rules
from fw_assets.bucketing.bucketed_contract import check_bucketed
from fw_assets.bucketing.sampled_contract import binomial_tolerance, check_selection
from fw_assets.paths import selection_path
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets_tests import bad_inputs as bad
from fw_assets_tests.contract_cases import DUMP, ROWS, outcome


def test_blocking_checks_are_declared_on_every_stage_per_dump():
    from fw_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    specs = {
        (key.asset_key.to_user_string(), key.name): graph.get_check_spec(key)
        for key in graph.asset_check_keys
    }
    warnings_only = {("raw", "int_score"), ("raw", "text_sample")}
    assert {k for k in specs if k[0] in ("raw", "sampled", "bucketed")} >= warnings_only | {
        ("raw", "schema"), ("raw", "key_columns"),
        ("sampled", "schema"), ("sampled", "sampling_ratio"), ("sampled", "reconciliation"),
        ("bucketed", "schema"), ("bucketed", "score_in_bucket"), ("bucketed", "unique_ids"),
        ("bucketed", "reconciliation"),
    }
    for key, spec in specs.items():
        if key[0] in ("raw", "sampled", "bucketed"):
            assert spec.blocking == (key not in warnings_only), key
            assert spec.partitions_def is not None and DUMP in spec.partitions_def.get_partition_keys()


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



def test_bucketed_passes_on_a_clean_run(con, good_dump, clean_buckets):
    selection = selection_path(good_dump[1], DUMP)
    outcomes = check_bucketed(con, DUMP, clean_buckets, selection, SEED_POLICY)
    assert [o.check.name for o in outcomes] == ["schema", "score_in_bucket", "unique_ids", "reconciliation"]
    assert all(o.passed for o in outcomes)


def test_missing_output_rows_fail_bucketed_reconciliation(con, good_dump, clean_buckets):
    (path,) = clean_buckets["3.0"]
    dropped = bad.rewrite(path, lambda t: t.slice(5))["id"].to_pylist()[:5]
    selection = selection_path(good_dump[1], DUMP)
    outcomes = check_bucketed(con, DUMP, clean_buckets, selection, SEED_POLICY)
    reconciliation = outcome(outcomes, "reconciliation")
    problems = [v.describe() for v in reconciliation.violations]
    kept = reconciliation.figures["kept_3.0"]
    assert f"bucket 3.0 holds {kept - 5:,} rows, the selection kept {kept:,}" in problems
    missing = next(v for v in reconciliation.violations if v.rule == "ids_missing")
    assert missing.rows == 5 and set(missing.examples) == set(sorted(dropped)[:5])


def test_a_file_in_the_wrong_bucket_fails_score_in_bucket(con, good_dump, clean_buckets):
    misplaced = {**clean_buckets, "3.0": clean_buckets["3.0"] + clean_buckets["4.0"], "4.0": []}
    selection = selection_path(good_dump[1], DUMP)
    scores = outcome(check_bucketed(con, DUMP, misplaced, selection, SEED_POLICY), "score_in_bucket")
    rows_4_0 = sum(pq.read_metadata(f).num_rows for f in clean_buckets["4.0"])
    assert scores.figures["score_outside_bucket"] == rows_4_0
    assert "with a score outside their bucket's interval" in scores.violations[0].describe()
    assert scores.violations[0].file.startswith("3.0/")


def test_an_id_written_twice_fails_unique_ids(con, good_dump, clean_buckets):
    (path,) = clean_buckets["4.0"]
    first = pq.read_table(path)["id"][0].as_py()
    bad.rewrite(path, bad.with_values("id", {1: first}))
    selection = selection_path(good_dump[1], DUMP)
    unique = outcome(check_bucketed(con, DUMP, clean_buckets, selection, SEED_POLICY), "unique_ids")
    (violation,) = unique.violations
    assert violation.rows == 2 and violation.examples == (f"{first} ×2 in {path.name}",)


def test_an_extra_output_column_fails_the_bucketed_schema(con, good_dump, clean_buckets):
    (path,) = clean_buckets["2.8"]
    bad.rewrite(path, lambda t: t.append_column("bucket", pa.array(["2.8"] * t.num_rows)))
    selection = selection_path(good_dump[1], DUMP)
    (schema,) = check_bucketed(con, DUMP, clean_buckets, selection, SEED_POLICY)
    assert [v.describe() for v in schema.violations] == [
        f"file 2.8/{path.name}, column bucket: is not part of the contract "
        f"({pq.read_metadata(path).num_rows:,} rows)"
    ]


"""The bucketed output's contract on its own, on the real files of a clean run: each check passes
on them and fails, naming rows and examples, on a copy broken in one way."""

import pyarrow as pa
import pyarrow.parquet as pq

from fw_assets.bucketing.bucketed_contract import check_bucketed
from fw_assets.paths import selection_path
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets_tests.support import bad_inputs as bad
from fw_assets_tests.support.contract_cases import DUMP, outcome


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

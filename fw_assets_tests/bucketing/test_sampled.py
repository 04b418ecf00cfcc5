"""`sampled` run by run: it re-checks the source when run without `raw`, and warns about what it
samples."""

import math

import dagster as dg

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.bucketing.sampled import sampled
from fw_assets_tests.support import bad_inputs as bad
from fw_assets_tests.support.contract_cases import DUMP, FIRST
from fw_assets_tests.support.trees import published_tree


def test_blank_texts_in_sampled_rows_warn(workspace):
    bad.rewrite(workspace.file(FIRST), bad.with_values("text", {0: "", 1: "   \n"}))
    run = workspace.run()
    assert run.result.success
    warning = run.check("raw", "text_sample")
    assert not warning.passed and warning.severity == dg.AssetCheckSeverity.WARN
    assert warning.metadata["text_blank"].value == 2
    assert warning.metadata["rows_sampled"].value == 2 * 200  # two files of one row group each


def test_sampled_rechecks_the_source_when_run_without_raw(workspace):
    bad.rewrite(workspace.file(FIRST), bad.with_values("score", {0: math.nan}))
    run = workspace.run(assets=[sampled, bucketed])
    message = run.failure("sampled")
    assert f"Dump {DUMP} failed the raw contract" in message
    assert "1 row with a NaN or ±inf score" in message
    assert not run.materialized("sampled") and not run.materialized("bucketed")
    assert published_tree(workspace.output) == workspace.published_before

    bad.rewrite(workspace.file(FIRST), bad.with_values("score", {0: 3.0}))
    rerun = workspace.run(assets=[sampled, bucketed])
    assert rerun.result.success
    assert rerun.result.asset_materializations_for_node("sampled")[0].metadata["raw_rechecked"].value is True

"""`raw` refuses bad source files run by run, with a message naming the dump, file, column, rows and
examples, or accepts them; either way the output published before is kept."""

import math
import shutil
import subprocess
import sys

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.bucketing.sampled import sampled
from fw_assets.paths import bucketed_files
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.synthetic import write_sample_dump
from fw_assets_tests.support import bad_inputs as bad
from fw_assets_tests.support.contract_cases import DUMP, FIRST, OTHER_DUMP, ROWS, SECOND
from fw_assets_tests.support.contract_runs import assert_accepted, assert_refused, ids_at
from fw_assets_tests.support.runs import subprocess_env
from fw_assets_tests.support.trees import published_tree


def test_missing_column_is_refused_naming_file_and_column(workspace):
    bad.rewrite(workspace.file(SECOND), bad.without_column("score"))
    run = workspace.run()
    assert_refused(workspace, run, "raw", "schema", f"file {SECOND}", "column score", "is missing")


def test_score_stored_as_string_is_refused_with_both_types(workspace):
    bad.rewrite(workspace.file(FIRST), bad.with_values("score", {}, type=pa.string()))
    run = workspace.run()
    assert_refused(
        workspace, run, "raw", "schema", f"file {FIRST}", "column score", "has type string, expected double"
    )


def test_null_score_is_refused_with_rows_and_example_ids(workspace):
    bad.rewrite(workspace.file(SECOND), bad.with_values("score", {3: None, 17: None}))
    run = workspace.run()
    first, second = ids_at(workspace.file(SECOND), [3, 17])
    assert_refused(
        workspace, run, "raw", "key_columns",
        f"file {SECOND}, column score: 2 rows with a null score", f"{first} (row 3)", f"{second} (row 17)",
    )
    assert run.check("raw", "key_columns").metadata["score_null"].value == 2


def test_nan_and_infinite_scores_are_refused(workspace):
    damage = {10: math.nan, 11: math.inf, 12: -math.inf}
    bad.rewrite(workspace.file(FIRST), bad.with_values("score", damage))
    run = workspace.run()
    ids = ids_at(workspace.file(FIRST), [10, 11, 12])
    assert_refused(
        workspace, run, "raw", "key_columns",
        "column score: 3 rows with a NaN or ±inf score",
        f"{ids[0]} (row 10): score=nan", f"{ids[1]} (row 11): score=inf", f"{ids[2]} (row 12): score=-inf",
    )


def test_negative_score_is_refused(workspace):
    bad.rewrite(workspace.file(FIRST), bad.with_values("score", {5: -0.5}))
    run = workspace.run()
    (doc_id,) = ids_at(workspace.file(FIRST), [5])
    assert_refused(
        workspace, run, "raw", "key_columns",
        "1 row with a score outside 0–6", f"{doc_id} (row 5): score=-0.5",
    )


def test_duplicate_id_within_the_dump_is_refused_naming_both_files(workspace):
    (doc_id,) = ids_at(workspace.file(FIRST), [5])
    bad.rewrite(workspace.file(SECOND), bad.with_values("id", {7: doc_id}))
    run = workspace.run()
    assert_refused(
        workspace, run, "raw", "key_columns",
        "column id: 2 rows whose id occurs more than once", f"{doc_id} ×2 in {FIRST} and {SECOND}",
    )


@pytest.mark.parametrize("emptied", ["no parquet files", "only zero-row files"])
def test_empty_dump_folder_is_refused(workspace, emptied):
    for path in (workspace.source / "data" / DUMP).glob("*.parquet"):
        if emptied == "no parquet files":
            path.unlink()
        else:
            bad.rewrite(path, lambda table: table.slice(0, 0))
    run = workspace.run()
    expected = "holds no *.parquet files" if emptied == "no parquet files" else "2 files hold no rows"
    assert_refused(workspace, run, "raw", "schema", expected)


@pytest.mark.parametrize("assets", [None, [sampled, bucketed]], ids=["with raw", "without raw"])
def test_a_missing_shard_is_refused_naming_it_whoever_starts_the_run(workspace, assets):
    (workspace.source / "data" / DUMP / SECOND).unlink()
    run = workspace.run(assets=assets)
    expected = f"1 of 2 shards missing ({SECOND})"
    if assets is None:
        assert_refused(workspace, run, "raw", "schema", expected)
    else:
        assert not run.result.success and expected in run.failure("sampled")
        assert published_tree(workspace.output) == workspace.published_before


def test_a_link_to_a_missing_blob_is_refused_naming_the_file(workspace):
    bad.dangle(workspace.file(SECOND))
    run = workspace.run()
    assert_refused(workspace, run, "raw", "schema", f"file {SECOND}", "which does not exist")


def test_macos_appledouble_files_are_ignored_and_named(workspace):
    twin = bad.apple_double_beside(workspace.file(FIRST))
    run = workspace.run()
    assert_accepted(run)
    (record,) = run.result.asset_materializations_for_node("raw")
    assert record.metadata["ignored_files"].value == twin.name


def test_zero_row_file_is_accepted_and_changes_nothing(workspace):
    rows_before = workspace.bucket_rows()
    # named outside the train-*-of-00002 set: a third shard of two would be refused
    bad.write_empty_like(workspace.file("extra-00000.parquet"), workspace.file(FIRST))
    run = workspace.run()
    assert_accepted(run)
    schema = run.check("raw", "schema")
    assert schema.passed
    assert schema.metadata["empty_files"].value == 1
    assert schema.metadata["empty_file_names"].value == "extra-00000.parquet"
    assert workspace.bucket_rows() == rows_before


@pytest.mark.parametrize("damage", ["truncated", "corrupt page"])
def test_truncated_or_corrupt_file_is_refused_naming_it(workspace, damage):
    if damage == "truncated":
        bad.truncate(workspace.file(SECOND))
        check, phrase = "schema", "is not a readable parquet file"
    else:
        bad.corrupt_column(workspace.file(SECOND), "score")
        check, phrase = "key_columns", "cannot be read"
    run = workspace.run()
    assert_refused(workspace, run, "raw", check, f"file {SECOND}", phrase, "re-download it")


def test_dump_column_disagreeing_with_its_folder_is_refused(workspace):
    bad.rewrite(workspace.file(SECOND), bad.with_values("dump", dict.fromkeys(range(ROWS // 2), OTHER_DUMP)))
    run = workspace.run()
    (first_id,) = ids_at(workspace.file(SECOND), [0])
    assert_refused(
        workspace, run, "raw", "key_columns",
        f"file {SECOND}, column dump: 1,000 rows with a dump other than {DUMP}",
        f"{first_id} (row 0): dump='{OTHER_DUMP}'",
    )


def test_extra_unknown_columns_are_accepted_and_ignored(workspace):
    rows_before = workspace.bucket_rows()
    bad.rewrite(workspace.file(FIRST), bad.with_extra_columns)
    run = workspace.run()
    assert_accepted(run)
    assert workspace.bucket_rows() == rows_before
    for files in bucketed_files(workspace.output, DUMP, SEED_POLICY).values():
        for f in files:
            assert pq.read_schema(f).names == ["id", "text", "score"]


def test_large_string_columns_of_a_re_exported_file_are_accepted(workspace):
    rows_before = workspace.bucket_rows()
    bad.rewrite(workspace.file(SECOND), lambda t: t.cast(pa.schema(
        [f.with_type(pa.large_string()) if f.type == pa.string() else f for f in t.schema]
    )))
    assert pq.read_schema(workspace.file(SECOND)).field("text").type == pa.large_string()
    run = workspace.run()
    assert_accepted(run)
    assert workspace.bucket_rows() == rows_before


def test_non_ascii_and_one_megabyte_texts_are_accepted_intact(workspace):
    table = pq.read_table(workspace.file(FIRST))
    pairs = zip(table["id"].to_pylist(), table["score"].to_pylist())
    kept = [i for i, (doc_id, score) in enumerate(pairs) if SEED_POLICY.keeps(doc_id, score)]
    texts = {
        kept[0]: "Ünïcödé façade — 北京大学 — مرحبا — 🦀🚀 — e\u0301 — \u200bzero-width",
        kept[1]: ("Long page. " + "Здравствуйте, мир! " * 100) * 500,  # ~1 MB of UTF-8
    }
    assert len(texts[kept[1]].encode()) > 1_000_000
    bad.rewrite(workspace.file(FIRST), bad.with_values("text", texts))
    run = workspace.run()
    assert_accepted(run)
    published = {doc_id: text for rows in workspace.bucket_rows().values() for doc_id, text, _ in rows}
    for row, text in texts.items():
        assert published[table["id"][row].as_py()] == text


@pytest.mark.e2e
def test_folder_not_named_like_a_dump_is_ignored_with_a_warning(workspace, tmp_path):
    (workspace.source / "data" / "downloads-tmp").mkdir()
    (workspace.source / "data" / "CC-MAIN-2013-20.bak").mkdir()
    shutil.copy(workspace.file(FIRST), workspace.source / "data" / "downloads-tmp" / FIRST)
    completed = subprocess.run(
        [sys.executable, "-c",
         "import fw_assets.definitions as d;"
         "print(','.join(d.defs.resolve_assets_def('raw').partitions_def.get_partition_keys()))"],
        env=subprocess_env(workspace.source, workspace.output, tmp_path),
        capture_output=True, text=True, timeout=120,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    keys = completed.stdout.strip().split(",")
    assert DUMP in keys and "downloads-tmp" not in keys and "CC-MAIN-2013-20.bak" not in keys
    for name in ("downloads-tmp", "CC-MAIN-2013-20.bak"):
        assert f"Ignoring {name!r} in {workspace.source / 'data'}: not a dump folder" in completed.stderr
    assert_accepted(workspace.run())


def test_file_path_not_naming_the_dump_is_refused(workspace):
    wrong = "s3://commoncrawl/crawl-data/CC-MAIN-2013-48/segments/1/warc/x.warc.gz"
    bad.rewrite(workspace.file(FIRST), bad.with_values("file_path", {0: wrong, 1: None}))
    run = workspace.run()
    assert_refused(
        workspace, run, "raw", "key_columns",
        f"column file_path: 2 rows with a file_path not under crawl-data/{DUMP}/", "file_path='s3://",
    )


@pytest.mark.parametrize("statistics", [True, False], ids=["footer null counts", "no statistics"])
def test_null_text_is_found_in_every_row_with_or_without_footer_statistics(workspace, statistics):
    bad.rewrite(workspace.file(SECOND), bad.with_values("text", {999: None}), write_statistics=statistics)
    run = workspace.run()
    (doc_id,) = ids_at(workspace.file(SECOND), [999])
    assert_refused(workspace, run, "raw", "key_columns", "1 row with a null text", f"{doc_id} (row 999)")
    scanned = run.check("raw", "key_columns").metadata["files_scanned_for_text_nulls"].value
    assert scanned == 1  # only the file that has (or may have) nulls is read


@pytest.mark.parametrize("width", [pa.int8(), pa.int32(), pa.uint16()])
def test_int_score_of_any_integer_width_is_accepted(workspace, width):
    rows_before = workspace.bucket_rows()
    bad.rewrite(workspace.file(FIRST), bad.with_values("int_score", {}, type=width))
    run = workspace.run()
    assert_accepted(run)
    assert run.check("raw", "int_score").passed
    assert workspace.bucket_rows() == rows_before


def test_inconsistent_int_score_only_warns_and_publishes(workspace):
    bad.rewrite(workspace.file(FIRST), bad.with_values("int_score", {0: 5, 1: -1, 2: None}))
    run = workspace.run()
    assert run.result.success and run.materialized("bucketed")
    warning = run.check("raw", "int_score")
    assert not warning.passed and warning.severity == dg.AssetCheckSeverity.WARN
    assert warning.metadata["int_score_mismatch"].value == 3
    assert "3 rows with an int_score other than" in warning.metadata["problems"].value[0]
    assert published_tree(workspace.output).keys() == workspace.published_before.keys()


def test_a_good_run_records_every_check_per_dump_with_figures(workspace):
    write_sample_dump(workspace.source, OTHER_DUMP, 500, 1, seed=3)
    bad.rewrite(workspace.source / "data" / OTHER_DUMP / "train-00000-of-00001.parquet",
                bad.with_values("id", {4: None}))
    with dg.DagsterInstance.ephemeral() as instance:
        good = workspace.run(instance=instance)
        refused = workspace.run(dump=OTHER_DUMP, instance=instance)
        keys = [
            dg.AssetCheckKey(dg.AssetKey(asset), name)
            for asset, names in {
                "raw": ["schema", "key_columns", "int_score", "text_sample"],
                "sampled": ["schema", "sampling_ratio", "reconciliation"],
                "bucketed": ["schema", "score_in_bucket", "unique_ids", "reconciliation"],
            }.items()
            for name in names
        ]
        infos = instance.event_log_storage.get_asset_check_partition_info(keys)
    status = {
        (i.check_key.asset_key.to_user_string(), i.check_key.name, i.partition_key): i.latest_execution_status
        for i in infos
    }
    for key in keys:
        assert status[(key.asset_key.to_user_string(), key.name, DUMP)] == AssetCheckExecutionRecordStatus.SUCCEEDED
    assert status[("raw", "key_columns", OTHER_DUMP)] == AssetCheckExecutionRecordStatus.FAILED
    # each result is of its dump and points at the materialization its own run made of that dump
    for evaluation in good.result.get_asset_check_evaluations():
        assert evaluation.partition == DUMP
        assert evaluation.target_materialization_data.run_id == good.result.run_id, evaluation.asset_check_key
    # a refused dump's results still name it; it has no materialization for them to point at
    for evaluation in refused.result.get_asset_check_evaluations():
        assert evaluation.partition == OTHER_DUMP and evaluation.target_materialization_data is None
    # the refused dump's later checks were planned, never evaluated: its sampled step never ran
    assert status[("sampled", "sampling_ratio", OTHER_DUMP)] == AssetCheckExecutionRecordStatus.PLANNED
    assert not refused.result.success

    ratio = good.check("sampled", "sampling_ratio").metadata
    for bucket in SEED_POLICY.buckets:
        rows_in, kept = ratio[f"rows_in_{bucket.name}"].value, ratio[f"kept_{bucket.name}"].value
        assert abs(kept - rows_in * bucket.rate) <= ratio[f"tolerance_{bucket.name}"].value
    assert good.check("raw", "key_columns").metadata["rows_checked"].value == ROWS
    # raw passed on these very files earlier in the run, so sampled did not read them again
    assert good.result.asset_materializations_for_node("sampled")[0].metadata["raw_rechecked"].value is False
    reconciliation = good.check("bucketed", "reconciliation").metadata
    for bucket in SEED_POLICY.buckets:
        assert reconciliation[f"rows_{bucket.name}"].value == reconciliation[f"kept_{bucket.name}"].value

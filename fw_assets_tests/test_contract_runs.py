"""Contracts that stop bad data, run by run: every bad input is either refused with a message naming
the dump, file, column, rows and examples, or accepted; either way the output published before is
kept."""

import math
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.bucketing.sampled import sampled
from fw_assets.paths import bucketed_files, publication_name, selection_path
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.synthetic import write_sample_dump
from fw_assets_tests import bad_inputs as bad
from fw_assets_tests.conftest import subprocess_env
from fw_assets_tests.contract_cases import DUMP, FIRST, OTHER_DUMP, ROWS, SECOND
from fw_assets_tests.helpers import materialize_dump, published_tree, rerecord_size


@dataclass
class Run:
    result: dg.ExecuteInProcessResult

    def failure(self, step: str) -> str:
        """The user-facing message of the step's failure."""
        return self.result.failure_data_for_node(step).user_failure_data.description

    def check(self, asset: str, name: str) -> dg.AssetCheckEvaluation:
        (evaluation,) = [
            e
            for e in self.result.get_asset_check_evaluations()
            if e.asset_key == dg.AssetKey(asset) and e.check_name == name
        ]
        return evaluation

    def materialized(self, asset: str) -> bool:
        return bool(self.result.asset_materializations_for_node(asset))


@dataclass
class Workspace:
    """A copy of the good dump and of its published output, for one test to damage."""

    source: Path
    output: Path
    published_before: dict[str, str]

    def file(self, name: str) -> Path:
        return self.source / "data" / DUMP / name

    def run(self, assets=None, dump: str = DUMP, instance=None) -> Run:
        kwargs = {"assets": assets} if assets else {}
        return Run(
            materialize_dump(
                self.source, self.output, dump, instance=instance, raise_on_error=False, **kwargs
            )
        )

    def bucket_rows(self) -> dict[str, set[tuple]]:
        """The published rows of the dump per bucket, as (id, text, score)."""
        return {
            bucket: {
                (r["id"], r["text"], r["score"])
                for f in files
                for r in pq.read_table(f).to_pylist()
            }
            for bucket, files in bucketed_files(self.output, DUMP, SEED_POLICY).items()
        }


@pytest.fixture
def workspace(good_dump, tmp_path) -> Workspace:
    source, output = good_dump
    shutil.copytree(source, tmp_path / "source")
    shutil.copytree(output, tmp_path / "output")
    return Workspace(tmp_path / "source", tmp_path / "output", published_tree(tmp_path / "output"))


def assert_refused(
    ws: Workspace, run: Run, asset: str, check: str, *phrases: str, published=lambda tree: tree
) -> None:
    """The run failed at `asset` with a message naming the dump and `phrases`; the failed check
    carries the same; the stages after it did not run; the `published` part of the published files
    (all of them unless told) is untouched."""
    assert not run.result.success
    message = run.failure(asset)
    for phrase in (DUMP, *phrases):
        assert phrase in message, f"{phrase!r} not in:\n{message}"
    assert "nothing was published" in message
    evaluation = run.check(asset, check)
    assert not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.partition == DUMP
    problems = " ".join(evaluation.metadata["problems"].value)
    for phrase in phrases:
        assert phrase in problems, f"{phrase!r} not in the check's metadata: {problems}"
    assert not run.materialized(asset)
    assert not run.materialized("bucketed")
    assert published(published_tree(ws.output)) == published(ws.published_before)


def assert_bucketed_refused(ws: Workspace, run: Run, check: str, *phrases: str) -> None:
    """Like assert_refused, for bucketed after raw and sampled published: the published buckets
    and bucketed's generation record are untouched (raw's and sampled's records moved on)."""
    assert_refused(ws, run, "bucketed", check, *phrases, published=bucketed_tree)


def bucketed_tree(tree: dict[str, str]) -> dict[str, str]:
    """The entries of a published tree that bucketed writes."""
    return {path: digest for path, digest in tree.items() if path.startswith("en/") or "bucketed" in path}


def rows_where(path: Path, kept: bool) -> list[int]:
    """The rows of a source file the seed policy keeps (or drops)."""
    table = pq.read_table(path, columns=["id", "score"])
    pairs = zip(table["id"].to_pylist(), table["score"].to_pylist())
    return [i for i, (doc_id, score) in enumerate(pairs) if SEED_POLICY.keeps(doc_id, score) == kept]


def assert_accepted(run: Run) -> None:
    """Every stage was recorded and all eleven blocking checks passed (the bucketing contracts' ten
    and deduplicated.reconciliation)."""
    assert run.result.success
    assert all(run.materialized(asset) for asset in ("raw", "sampled", "bucketed"))
    evaluations = run.result.get_asset_check_evaluations()
    blocking = [e for e in evaluations if e.severity == dg.AssetCheckSeverity.ERROR]
    assert len(blocking) == 11 and all(e.passed for e in blocking)


def ids_at(path: Path, rows: list[int]) -> list[str]:
    ids = pq.read_table(path, columns=["id"]).column("id").to_pylist()
    return [ids[r] for r in rows]


# --- the bad inputs of the issue, one test each --------------------------------------------


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


@pytest.mark.parametrize(
    "damaged, statistics",
    [("kept", True), ("dropped", True), ("kept", False)],
    ids=["kept rows", "dropped rows", "kept rows, footers without null counts"],
)
def test_text_that_is_not_utf8_is_refused_by_bucketed_naming_file_row_group_and_rows(
    workspace, damaged, statistics
):
    """raw and sampled decode no text (raw scans the texts for nulls where a footer has no null
    counts, without judging their encoding) and publish; bucketed's scan decodes every text it
    reads, kept or dropped, and refuses the dump naming the file, row group and rows; its buckets
    stay as they were."""
    rows = rows_where(workspace.file(SECOND), kept=damaged == "kept")[:2]
    bad.rewrite(
        workspace.file(SECOND), bad.with_latin1_texts(rows),
        row_group_size=ROWS // 8, write_statistics=statistics,
    )
    run = workspace.run()
    assert run.materialized("raw") and run.materialized("sampled")
    first, second = ids_at(workspace.file(SECOND), rows)
    assert_bucketed_refused(
        workspace, run, "source_texts",
        f"file {SECOND}, column text: 2 rows whose text is not valid UTF-8",
        f"{first} (row {rows[0]}, row group {rows[0] // (ROWS // 8)})",
        f"{second} (row {rows[1]}, row group {rows[1] // (ROWS // 8)})",
    )
    assert run.check("bucketed", "source_texts").metadata["text_not_utf8"].value == 2


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


def test_corrupt_text_page_is_refused_by_bucketed_naming_the_file(workspace):
    """raw and sampled read no text, so a damaged text page passes them and stops the dump at
    bucketed's scan, the first step to decode the texts."""
    bad.corrupt_column(workspace.file(SECOND), "text")
    run = workspace.run()
    assert run.materialized("raw") and run.materialized("sampled")
    assert_bucketed_refused(
        workspace, run, "source_texts", f"file {SECOND}: cannot be read", "re-download it"
    )
    assert FIRST not in run.failure("bucketed")


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
        assert f"Ignoring {workspace.source / 'data' / name}: not a dump folder" in completed.stderr
    assert_accepted(workspace.run())


# --- more of the contracts ------------------------------------------------------------------


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


def test_bucketed_run_alone_after_the_source_moved_is_refused(workspace):
    """The selection names source files by path; the workspace is a moved copy of the snapshot."""
    run = workspace.run(assets=[bucketed])
    assert_refused(
        workspace, run, "bucketed", "reconciliation", "bucket 3.0 holds 0 rows, the selection kept"
    )


def test_bucketed_refuses_output_that_breaks_its_contract_and_keeps_the_published_buckets(
    good_dump, workspace
):
    """A selection edited by hand after it was published puts a 3.0 row into bucket 4.0."""
    path = selection_path(workspace.output, DUMP)
    table = pq.read_table(path)
    row = next(
        i
        for i, (bucket, keep) in enumerate(zip(table["bucket"].to_pylist(), table["keep"].to_pylist()))
        if bucket == "3.0" and keep
    )
    moved = [f.replace(str(good_dump[0]), str(workspace.source)) for f in table["source_file"].to_pylist()]
    table = bad.with_values("source_file", dict(enumerate(moved)))(table)
    pq.write_table(bad.with_values("bucket", {row: "4.0"})(table), path)
    rerecord_size(workspace.output, publication_name("sampled", DUMP), path)
    workspace.published_before = published_tree(workspace.output)

    run = workspace.run(assets=[bucketed])
    doc_id, score = table["id"][row].as_py(), table["score"][row].as_py()
    assert_refused(
        workspace, run, "bucketed", "score_in_bucket",
        "1 row with a score outside their bucket's interval", f"{doc_id} (row", f"score={score}",
    )


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

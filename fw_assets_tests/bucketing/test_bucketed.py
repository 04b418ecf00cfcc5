"""`bucketed` run by run: texts that are not UTF-8, damaged pages and output breaking its contract
are refused naming file, row group and rows, keeping the published buckets; a good run records every
check per dump."""

import pyarrow.parquet as pq
import pytest

from fw_assets.bucketing.bucketed import bucketed
from fw_assets.paths import publication_name, selection_path
from fw_assets_tests.support import bad_inputs as bad
from fw_assets_tests.support.contract_cases import DUMP, FIRST, ROWS, SECOND
from fw_assets_tests.support.contract_runs import assert_bucketed_refused, assert_refused, ids_at, rows_where
from fw_assets_tests.support.trees import published_tree, rerecord_file


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
    rerecord_file(workspace.output, publication_name("sampled", DUMP), path)
    workspace.published_before = published_tree(workspace.output)

    run = workspace.run(assets=[bucketed])
    doc_id, score = table["id"][row].as_py(), table["score"][row].as_py()
    assert_refused(
        workspace, run, "bucketed", "score_in_bucket",
        "1 row with a score outside their bucket's interval", f"{doc_id} (row", f"score={score}",
    )

"""raw -> sampled -> bucketed through Dagster on generated dumps: layout, contents, re-runs."""

import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.dagster_services import DUMP_CLI_SELECTION
from fw_assets.lib.cores import usable_cores
from fw_assets.paths import selection_path
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets_tests.support.runs import SAMPLE_DUMPS, materialize_dump, read_source, subprocess_env
from fw_assets_tests.support.trees import published_tree

BUCKET_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("score", pa.float64())])


@pytest.fixture
def published(tokenized_sample):
    """Both sample dumps materialized in process into one output root (the session's, read-only)."""
    return tokenized_sample.output, tokenized_sample.runs


def _bucket_rows(output, dump) -> dict[str, pa.Table]:
    tables = {}
    for bucket in SEED_POLICY.buckets:
        files = sorted((output / "en" / bucket.name / dump).glob("*.parquet"))
        tables[bucket.name] = pa.concat_tables(pq.read_table(f) for f in files) if files else None
    return tables


@pytest.mark.parametrize("dump", SAMPLE_DUMPS)
def test_published_layout_columns_and_compression(published, dump):
    output, _ = published
    for bucket in SEED_POLICY.buckets:
        files = sorted((output / "en" / bucket.name / dump).glob("*.parquet"))
        assert files, f"no files for bucket {bucket.name}"
        for file in files:
            parquet = pq.ParquetFile(file)
            assert parquet.schema_arrow.remove_metadata() == BUCKET_SCHEMA
            columns = parquet.metadata.row_group(0)
            assert {columns.column(i).compression for i in range(columns.num_columns)} == {"ZSTD"}
    assert not list(output.glob("en/*/*/bucket=*")), "hive folder names must not leak into the layout"
    assert not list((output / ".staging").glob(f"*{dump}*")), "staging must be gone after a run"


@pytest.mark.parametrize("dump", SAMPLE_DUMPS)
def test_kept_rows_are_the_seed_samplers_choice_in_the_right_bucket(published, sample_source, dump):
    output, _ = published
    source = read_source(sample_source, dump).select(["id", "text", "score"]).to_pylist()
    expected = {row["id"]: row for row in source if SEED_POLICY.keeps(row["id"], row["score"])}
    seen = {}
    for bucket_name, rows in _bucket_rows(output, dump).items():
        bucket = next(b for b in SEED_POLICY.buckets if b.name == bucket_name)
        for row in rows.to_pylist():
            assert bucket.contains(row["score"]), (bucket_name, row["score"])
            assert row["id"] not in seen, "buckets overlap"
            seen[row["id"]] = row
    assert seen == expected


@pytest.mark.parametrize("dump", SAMPLE_DUMPS)
def test_bucket_counts_equal_the_selection_and_the_metadata(published, dump):
    output, runs = published
    with duckdb.connect() as con:
        kept = dict(
            con.execute(
                "SELECT bucket, count(*) FROM read_parquet(?) WHERE keep GROUP BY bucket",
                [str(selection_path(output, dump))],
            ).fetchall()
        )
    written = {name: rows.num_rows for name, rows in _bucket_rows(output, dump).items()}
    assert written == kept
    bucketed_meta, sampled_meta = runs[dump].metadata["bucketed"], runs[dump].metadata["sampled"]
    for bucket, rows in written.items():
        assert bucketed_meta[f"rows_{bucket}"] == rows
        assert sampled_meta[f"rows_kept_{bucket}"] == rows
    assert bucketed_meta["dagster/row_count"] == sum(written.values())


def test_every_duckdb_step_records_its_threads_and_the_usable_cores(published):
    _, runs = published
    for asset in ("raw", "sampled", "bucketed"):
        meta = runs[SAMPLE_DUMPS[0]].metadata[asset]
        assert meta["threads"] == 2, asset  # as the tests' Warehouse(threads=2) says
        assert meta["usable_cores"] == usable_cores(), asset


def test_raw_records_a_manifest_from_parquet_footers(published, sample_source):
    _, runs = published
    meta = runs[SAMPLE_DUMPS[0]].metadata["raw"]
    manifest = meta["manifest"]
    files = sorted((sample_source / "data" / SAMPLE_DUMPS[0]).glob("*.parquet"))
    assert [entry["path"] for entry in manifest] == [str(f) for f in files]
    assert [entry["bytes"] for entry in manifest] == [f.stat().st_size for f in files]
    assert sum(entry["rows"] for entry in manifest) == meta["dagster/row_count"] == 4_000
    assert manifest[0]["schema"]["score"] == "double"
    assert "| score from | rows |" in meta["score_histogram"]


def test_rerunning_a_dump_replaces_its_output_with_identical_rows(sample_source, tmp_path):
    dump = SAMPLE_DUMPS[0]
    materialize_dump(sample_source, tmp_path, dump)
    first = {b: sorted(t.to_pylist(), key=lambda r: r["id"]) for b, t in _bucket_rows(tmp_path, dump).items()}
    files_before = set(published_tree(tmp_path))
    materialize_dump(sample_source, tmp_path, dump)
    second = {b: sorted(t.to_pylist(), key=lambda r: r["id"]) for b, t in _bucket_rows(tmp_path, dump).items()}
    assert first == second
    assert set(published_tree(tmp_path)) == files_before, "a re-run must replace, not add files"


CLI_COMMANDS = {
    "dagster asset materialize": [sys.executable, "-m", "dagster", "asset", "materialize",
                                  "-m", "fw_assets.definitions", "--select", DUMP_CLI_SELECTION, "--partition"],
    "dg launch": [str(Path(sys.executable).with_name("dg")), "launch", "--assets", DUMP_CLI_SELECTION, "--partition"],
}


@pytest.mark.e2e
@pytest.mark.parametrize("cli", sorted(CLI_COMMANDS))
def test_cli_materializes_a_dump_from_the_repo_root(cli, sample_source, tmp_path, dagster_home):
    dump = SAMPLE_DUMPS[1]
    completed = subprocess.run(
        [*CLI_COMMANDS[cli], dump],
        cwd=Path(__file__).resolve().parents[2],
        env=subprocess_env(sample_source, tmp_path, dagster_home),
        capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    for bucket in SEED_POLICY.buckets:
        assert list((tmp_path / "en" / bucket.name / dump).glob("*.parquet"))
    with dg.DagsterInstance.get() as instance:
        assert instance.get_latest_materialization_event(dg.AssetKey("bucketed")) is not None

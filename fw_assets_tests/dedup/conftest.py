"""The dedup tests' dumps: generated dumps with planted near-duplicates, signed and decided once for
the tests that only read them (test_decide.py, test_explain.py), and two dumps run through the
chain in crawl order for the tests of the assets (test_deduplicated.py, test_minhash.py)."""

from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest

from bench.dedup_quality import DUMPS, PARAGRAPH_SHARE
from fw_assets.synthetic.generator import write_sample_dumps
from fw_assets_tests.support.dedup_runs import EARLY, LATE
from fw_assets_tests.support.dedup_runs import ROWS as DUMP_ROWS
from fw_assets_tests.support.made_once import made_once
from fw_assets_tests.support.planted_dumps import ROWS, decide, minhash_files
from fw_assets_tests.support.runs import materialize_dump


@pytest.fixture(scope="package")
def root(tmp_path_factory) -> Path:
    return made_once(tmp_path_factory, "dedup-planted", lambda root: write_sample_dumps(
        root, DUMPS, rows_per_dump=ROWS, seed=0, paragraph_share=PARAGRAPH_SHARE))


@pytest.fixture(scope="package")
def minhash(root, tmp_path_factory) -> dict[str, Path]:
    folder = made_once(tmp_path_factory, "dedup-planted-minhash", lambda folder: minhash_files(root, folder))
    return {dump: folder / f"{dump}.parquet" for dump in DUMPS}


@pytest.fixture(scope="package")
def decisions(minhash, tmp_path_factory) -> dict[str, Path]:
    folder = made_once(tmp_path_factory, "dedup-planted-decisions", lambda folder: decide(minhash, folder))
    return {dump: folder / f"{dump}.parquet" for dump in DUMPS}


@pytest.fixture(scope="package")
def texts(root) -> dict[str, str]:
    table = pq.read_table(root / "data", columns=["id", "text"])
    return dict(zip(table["id"].to_pylist(), table["text"].to_pylist()))


@pytest.fixture(scope="package")
def source(tmp_path_factory) -> Path:
    """The dumps EARLY and LATE, generated once for the dedup tests that run the assets."""
    root = tmp_path_factory.mktemp("dedup-source")
    write_sample_dumps(root, (EARLY, LATE), rows_per_dump=DUMP_ROWS, seed=5)
    return root


@pytest.fixture(scope="package")
def in_order(source, tmp_path_factory) -> tuple[Path, dict[str, dg.ExecuteInProcessResult]]:
    """Both dumps' chains in crawl order, as the sensor runs them."""
    output = tmp_path_factory.mktemp("in-order")
    with dg.DagsterInstance.ephemeral() as instance:
        results = {d: materialize_dump(source, output, d, instance=instance) for d in (EARLY, LATE)}
    return output, results

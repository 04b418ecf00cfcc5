"""The generated dumps with planted near-duplicates, signed and decided once for the dedup tests
that only read them (test_decide.py, test_explain.py)."""

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.dedup_quality import DUMPS, PARAGRAPH_SHARE
from fw_assets.synthetic.generator import write_sample_dumps
from fw_assets_tests.dedup.planted_dumps import ROWS, decide, minhash_files


@pytest.fixture(scope="package")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dedup")
    write_sample_dumps(root, DUMPS, rows_per_dump=ROWS, seed=0, paragraph_share=PARAGRAPH_SHARE)
    return root


@pytest.fixture(scope="package")
def minhash(root) -> dict[str, Path]:
    return minhash_files(root, root / "minhash")


@pytest.fixture(scope="package")
def decisions(root, minhash) -> dict[str, Path]:
    return decide(minhash, root / "dedup")


@pytest.fixture(scope="package")
def texts(root) -> dict[str, str]:
    table = pq.read_table(root / "data", columns=["id", "text"])
    return dict(zip(table["id"].to_pylist(), table["text"].to_pylist()))

"""The bucketing tests' data: one clean run of a generated dump (`good_dump`), and writable copies of
what it published for a test to damage (`workspace`, `clean_selection`, `clean_buckets`)."""

import shutil
from pathlib import Path

import pytest

from fw_assets.paths import bucketed_files, selection_path
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.synthetic import write_sample_dump
from fw_assets_tests.support.contract_cases import DUMP, FILES, ROWS
from fw_assets_tests.support.contract_runs import Workspace
from fw_assets_tests.support.made_once import made_once
from fw_assets_tests.support.runs import materialize_dump
from fw_assets_tests.support.trees import published_tree


@pytest.fixture
def workspace(good_dump, tmp_path) -> Workspace:
    source, output = good_dump
    shutil.copytree(source, tmp_path / "source")
    shutil.copytree(output, tmp_path / "output")
    return Workspace(tmp_path / "source", tmp_path / "output", published_tree(tmp_path / "output"))


@pytest.fixture(scope="session")
def good_dump(tmp_path_factory) -> tuple[Path, Path]:
    """A generated dump, and the output a clean run published for it (once for the session)."""
    root = made_once(tmp_path_factory, "good-dump", _run_good_dump)
    return root / "source", root / "published"


def _run_good_dump(root: Path) -> None:
    write_sample_dump(root / "source", DUMP, ROWS, FILES, seed=11)
    materialize_dump(root / "source", root / "published", DUMP)


@pytest.fixture
def clean_selection(good_dump, tmp_path) -> Path:
    """A writable copy of the selection the clean run published."""
    _, output = good_dump
    return Path(shutil.copy(selection_path(output, DUMP), tmp_path / "selection.parquet"))


@pytest.fixture
def clean_buckets(good_dump, tmp_path) -> dict[str, list[Path]]:
    """Writable copies of the bucket files the clean run published."""
    _, output = good_dump
    copies = {}
    for bucket, files in bucketed_files(output, DUMP, SEED_POLICY).items():
        folder = tmp_path / "buckets" / bucket
        folder.mkdir(parents=True)
        copies[bucket] = [Path(shutil.copy(f, folder / f.name)) for f in files]
    return copies

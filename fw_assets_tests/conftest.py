import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from fw_assets.paths import bucketed_files, selection_path
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.synthetic import write_sample_dump, write_sample_dumps
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.contract_cases import DUMP, FILES, ROWS
from fw_assets_tests.dagster_services import write_instance_yaml
from fw_assets_tests.helpers import CHAIN, make_read_only, materialize_dump, published_tree

SAMPLE_DUMPS = ("CC-MAIN-2013-20", "CC-MAIN-2013-48")


@pytest.fixture(scope="session")
def sample_source(tmp_path_factory) -> Path:
    """Two generated FineWeb-Edu dumps, two files each; shared read-only by the tests."""
    root = tmp_path_factory.mktemp("fineweb-edu")
    write_sample_dumps(root, SAMPLE_DUMPS, rows_per_dump=4_000, files_per_dump=2, seed=7)
    return root


@dataclass(frozen=True)
class TokenizedSample:
    """The sample dumps run through the chain and `tokenized`: what the runs published, and the
    instance that recorded them."""

    output: Path
    results: dict[str, dg.ExecuteInProcessResult]  # by dump
    instance: dg.DagsterInstance


@pytest.fixture(scope="session")
def tokenized_sample(sample_source, tmp_path_factory) -> TokenizedSample:
    """Both sample dumps in crawl order through the chain and `tokenized` (cl100k, two workers),
    into one output root, once per session. The root is read-only: a test that writes takes
    `helpers.writable_copy` of it (root ignores the modes: the session's end compares every file
    with what the runs published). The instance keeps its records in memory (an instance on disk
    commits each event to SQLite, seconds per run on a busy disk)."""
    output = tmp_path_factory.mktemp("tokenized-sample")
    tokenizer = {"tokenizer": TokenizerResource(workers=2)}
    with dg.DagsterInstance.ephemeral() as instance:
        results = {
            dump: materialize_dump(sample_source, output, dump, [*CHAIN, tokenized], instance, extra_resources=tokenizer)
            for dump in SAMPLE_DUMPS
        }
        make_read_only(output)
        published = published_tree(output)
        yield TokenizedSample(output, results, instance)
    assert published_tree(output) == published, "a test wrote into the shared tokenized_sample output"


@pytest.fixture
def dagster_home(tmp_path, monkeypatch) -> Path:
    """A throwaway DAGSTER_HOME with this repo's dagster.yaml."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    write_instance_yaml(home)  # its .dagster/ folders under this home, not the repo's
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def subprocess_env(source_root: Path, output_root: Path, dagster_home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "FW_SOURCE_DIR": str(source_root),
        "FW_OUTPUT_DIR": str(output_root),
        "DAGSTER_HOME": str(dagster_home),
    }


# --- the contract tests: one clean run of a generated dump, and copies to damage ---------------


@pytest.fixture(scope="session")
def good_dump(tmp_path_factory) -> tuple[Path, Path]:
    """A generated dump, and the output a clean run published for it."""
    source = tmp_path_factory.mktemp("source")
    write_sample_dump(source, DUMP, ROWS, FILES, seed=11)
    output = tmp_path_factory.mktemp("published")
    materialize_dump(source, output, DUMP)
    return source, output


@pytest.fixture
def con():
    with duckdb.connect() as connection:
        yield connection


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


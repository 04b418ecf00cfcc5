from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from fw_assets.demo import write_instance_yaml
from fw_assets.synthetic import write_sample_dumps
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.runs import CHAIN, SAMPLE_DUMPS, materialize_dump
from fw_assets_tests.support.trees import make_read_only, published_tree

# The `needs_extra` marker: a test needing an extra that is not installed is skipped (fails in CI).
pytest_plugins = ["fw_assets_tests.support.extras"]


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
            dump: materialize_dump(
                sample_source, output, dump, [*CHAIN, tokenized], instance, extra_resources=tokenizer
            )
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


@pytest.fixture
def con():
    """An in-memory DuckDB connection, closed after the test."""
    with duckdb.connect() as connection:
        yield connection

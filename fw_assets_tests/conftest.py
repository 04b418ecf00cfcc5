import json
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from fw_assets.demo import write_instance_yaml
from fw_assets.synthetic import write_sample_dumps
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.made_once import made_once
from fw_assets_tests.support.runs import CHAIN, SAMPLE_DUMPS, materialize_dump
from fw_assets_tests.support.trees import make_read_only, published_tree

# The `needs_extra` marker: a test needing an extra that is not installed is skipped (fails in CI);
# the modules that take minutes start first.
pytest_plugins = ["fw_assets_tests.support.extras", "fw_assets_tests.support.scheduling"]


@pytest.fixture(scope="session")
def sample_source(tmp_path_factory) -> Path:
    """Two generated FineWeb-Edu dumps, two files each; shared read-only by the tests (and by the
    xdist workers: the records of `tokenized_sample` name this folder)."""
    return made_once(tmp_path_factory, "fineweb-edu", lambda root: write_sample_dumps(
        root, SAMPLE_DUMPS, rows_per_dump=4_000, files_per_dump=2, seed=7))


@dataclass(frozen=True)
class SampleRun:
    """What one dump's run of `tokenized_sample` recorded: its tags, each asset's materialization
    metadata (values, by asset name) and its log messages."""

    tags: dict[str, str]
    metadata: dict[str, dict]
    logs: list[str]


@dataclass(frozen=True)
class TokenizedSample:
    """The sample dumps run through the chain and `tokenized`: what the runs published, and what
    each recorded."""

    output: Path
    runs: dict[str, SampleRun]  # by dump


@pytest.fixture(scope="session")
def tokenized_sample(sample_source, tmp_path_factory) -> TokenizedSample:
    """Both sample dumps in crawl order through the chain and `tokenized` (cl100k, two workers),
    into one output root, once per session (whichever xdist worker asks first). The root is
    read-only: a test that writes takes `helpers.writable_copy` of it (root ignores the modes: the
    session's end compares every file with what the runs published). The instance keeps its
    records in memory (an instance on disk commits each event to SQLite, seconds per run on a busy
    disk); what the tests read of them is kept beside the output, in runs.json."""
    root = made_once(tmp_path_factory, "tokenized-sample", lambda root: _tokenize_sample(sample_source, root))
    output = root / "output"
    runs = {dump: SampleRun(**run) for dump, run in json.loads((root / "runs.json").read_text()).items()}
    published = published_tree(output)
    yield TokenizedSample(output, runs)
    assert published_tree(output) == published, "a test wrote into the shared tokenized_sample output"


def _tokenize_sample(source: Path, root: Path) -> None:
    tokenizer = {"tokenizer": TokenizerResource(workers=2)}
    runs = {}
    with dg.DagsterInstance.ephemeral() as instance:
        for dump in SAMPLE_DUMPS:
            result = materialize_dump(source, root / "output", dump, [*CHAIN, tokenized], instance,
                                      extra_resources=tokenizer)
            runs[dump] = {
                "tags": dict(instance.get_run_by_id(result.run_id).tags),
                "metadata": _metadata_by_asset(result),
                "logs": [event.user_message for event in instance.all_logs(result.run_id)],
            }
    (root / "runs.json").write_text(json.dumps(runs))
    make_read_only(root / "output")


def _metadata_by_asset(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    metadata = {}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        metadata[materialization.asset_key.to_user_string()] = {
            key: value.value for key, value in materialization.metadata.items()
        }
    return metadata


@pytest.fixture
def instance():
    """A Dagster instance in memory: sensors and automation ticked over it record nothing on disk
    (an instance on disk commits each event to SQLite, seconds per run on a busy disk)."""
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


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

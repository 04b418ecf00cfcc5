import os
from pathlib import Path

import pytest

from fw_assets.synthetic import write_sample_dumps
from fw_assets_tests.dagster_services import write_instance_yaml

SAMPLE_DUMPS = ("CC-MAIN-2013-20", "CC-MAIN-2013-48")


@pytest.fixture(scope="session")
def sample_source(tmp_path_factory) -> Path:
    """Two generated FineWeb-Edu dumps, two files each; shared read-only by the tests."""
    root = tmp_path_factory.mktemp("fineweb-edu")
    write_sample_dumps(root, SAMPLE_DUMPS, rows_per_dump=4_000, files_per_dump=2, seed=7)
    return root


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

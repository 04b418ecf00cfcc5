"""End to end with the real services: dagster-webserver and dagster-daemon on 127.0.0.1 over
workspace.yaml and the repo's dagster.yaml, a generated dump dropped into the source folder, a UI
backfill through GraphQL, and a headless Chromium looking at the UI."""

from pathlib import Path

import pytest

from fw_assets import settings
from fw_assets.automation.sensors import FINGERPRINT_TAG
from fw_assets.layout import bucket_dump_dirs, selection_path
from fw_assets.partitions import known_dumps
from fw_assets.policy import SEED_POLICY
from fw_assets.synthetic import write_sample_dump
from fw_assets_tests.dagster_services import (
    REPO_ROOT,
    DagsterServices,
    HeadlessChromium,
    assert_whole_chain_succeeded,
    chain_asset_keys,
    find_chromium,
    run_partition,
    tag,
    write_instance_yaml,
)

pytestmark = pytest.mark.e2e

SENSOR_DUMP = "CC-MAIN-2013-20"
BACKFILL_DUMPS = ("CC-MAIN-2013-48", "CC-MAIN-2014-10")
ROWS = 1_200
ARTIFACTS = REPO_ROOT / "artifacts" / "e2e"


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("e2e")
    paths = {"home": root / "dagster_home", "source": root / "fineweb-edu", "output": root / "fineweb"}
    for path in paths.values():
        path.mkdir()
    (paths["source"] / "data").mkdir()
    write_instance_yaml(paths["home"])
    return paths


@pytest.fixture(scope="module")
def services(world):
    env = {
        "FW_SOURCE_DIR": str(world["source"]),
        "FW_OUTPUT_DIR": str(world["output"]),
        settings.SENSOR_INTERVAL_ENV: "5",
    }
    running = DagsterServices(world["home"], env)
    try:
        running.wait_until_ready()
        yield running
    finally:
        running.stop()


def materialized_partitions(services: DagsterServices, key) -> set[str]:
    return services.partition_statuses(key)["materializedPartitions"]


def assert_published(output: Path, dump: str) -> None:
    assert selection_path(output, dump).is_file()
    for bucket, folder in bucket_dump_dirs(output, dump, SEED_POLICY).items():
        assert list(folder.glob("*.parquet")), f"{dump}: nothing published for bucket {bucket} in {folder}"


@pytest.fixture(scope="module")
def sensor_run(services, world) -> dict:
    """A dump dropped into the running deployment's source folder, processed by the sensor."""
    write_sample_dump(world["source"], SENSOR_DUMP, rows=ROWS, files=2)
    tags = {"dagster/sensor_name": "new_dumps", "dagster/partition": SENSOR_DUMP}
    [run] = services.wait_for_runs("the sensor's run", tags, 1)
    return run


@pytest.fixture(scope="module")
def backfill_runs(services, world, sensor_run) -> tuple[str, list[dict]]:
    """With the sensor turned off (as in the UI), two more dumps backfilled through GraphQL."""
    services.stop_sensor("new_dumps")
    for dump in BACKFILL_DUMPS:
        write_sample_dump(world["source"], dump, rows=ROWS, files=1)
    backfill_id = services.launch_backfill(chain_asset_keys(), list(BACKFILL_DUMPS))
    return backfill_id, services.wait_for_runs(
        "the backfill's runs", {"dagster/backfill": backfill_id}, len(BACKFILL_DUMPS)
    )


def test_the_deployment_runs_on_the_repos_instance_config(services):
    services.assert_serves_instance_config(REPO_ROOT / "dagster.yaml")
    assert services.sensor_state("new_dumps")["status"] in ("RUNNING", "STOPPED")  # the sensor is loaded


def test_a_dump_dropped_into_the_source_folder_is_processed_by_the_sensor(services, world, sensor_run):
    assert_whole_chain_succeeded(sensor_run)
    fingerprint = tag(sensor_run, FINGERPRINT_TAG)
    assert fingerprint and fingerprint in tag(sensor_run, "dagster/run_key")
    assert_published(world["output"], SENSOR_DUMP)
    for key in chain_asset_keys():
        assert SENSOR_DUMP in materialized_partitions(services, key), key.to_user_string()
    # The sensor went on ticking and requested nothing more for the same files.
    assert len(services.runs({"dagster/sensor_name": "new_dumps"})) == 1


def test_a_backfill_of_two_dumps_is_two_runs_each_holding_the_whole_chain(services, world, backfill_runs):
    backfill_id, finished = backfill_runs
    assert len(services.runs({"dagster/backfill": backfill_id})) == len(BACKFILL_DUMPS)
    assert sorted(run_partition(run) for run in finished) == sorted(BACKFILL_DUMPS)
    for run in finished:
        assert_whole_chain_succeeded(run)
    for dump in BACKFILL_DUMPS:
        assert_published(world["output"], dump)
    for key in chain_asset_keys():
        assert set(BACKFILL_DUMPS) <= materialized_partitions(services, key), key.to_user_string()


@pytest.fixture(scope="module")
def chromium():
    executable = find_chromium()
    if executable is None:
        pytest.fail("Chromium not found: `apt-get install -y chromium` (.ci/run installs it)")
    browser = HeadlessChromium(executable)
    try:
        yield browser
    finally:
        browser.close()


def test_the_ui_shows_the_chain_and_the_materialized_dumps(services, sensor_run, backfill_runs, chromium):
    assets = [key.to_user_string() for key in chain_asset_keys()]
    chromium.open(f"{services.url}/locations/fw_assets/asset-groups/fineweb_edu")
    graph = chromium.wait_for_text(
        "the asset graph of group fineweb_edu, loaded",
        ["fineweb_edu", *assets, "% filled"],
        absent=("Loading",),
    )
    shot = chromium.screenshot(ARTIFACTS / "asset-graph.png")
    print(f"asset graph screenshot: {shot}")
    assert graph.count(f"{len(known_dumps())} partitions") == len(assets)
    assert "Materialize all" in graph

    dumps = [SENSOR_DUMP, *BACKFILL_DUMPS]
    chromium.open(f"{services.url}/assets/bucketed?view=partitions")
    partitions = chromium.wait_for_text(
        "the bucketed partitions view", [f"Materialized ({len(dumps)})", *dumps]
    )
    shot = chromium.screenshot(ARTIFACTS / "bucketed-partitions.png")
    print(f"partitions screenshot: {shot}")
    assert "Failed (0)" in partitions

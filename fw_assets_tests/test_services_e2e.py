"""End to end with the real services: dagster-webserver and dagster-daemon on 127.0.0.1 over
workspace.yaml and the repo's dagster.yaml, a generated dump dropped into the source folder, a UI
backfill through GraphQL, and a headless Chromium looking at the UI."""

from pathlib import Path

import dagster as dg
import pytest
import yaml

from fw_assets import settings
from fw_assets.automation.sensors import FINGERPRINT_TAG
from fw_assets.layout import bucket_dump_dirs, selection_path
from fw_assets.definitions import defs
from fw_assets.jobs import dump_chain_job
from fw_assets.partitions import known_dumps
from fw_assets.policy import SEED_POLICY
from fw_assets.synthetic import write_sample_dump
from fw_assets_tests.dagster_services import (
    REPO_ROOT,
    DagsterServices,
    HeadlessChromium,
    find_chromium,
    wait_for,
    write_instance_yaml,
)

pytestmark = pytest.mark.e2e

SENSOR_DUMP = "CC-MAIN-2013-20"
BACKFILL_DUMPS = ("CC-MAIN-2013-48", "CC-MAIN-2014-10")
ROWS = 1_200
RUN_TIMEOUT = 240  # seconds; a run of a small dump takes well under a minute here
ARTIFACTS = REPO_ROOT / "artifacts" / "e2e"

RUN_FIELDS = """runId status tags { key value } stepStats { stepKey status }
  eventConnection(afterCursor: null) { events { __typename
    ... on ExecutionStepFailureEvent { stepKey error { message } }
    ... on AssetCheckEvaluationEvent { evaluation { assetKey { path } checkName success } }
    ... on RunFailureEvent { message } } }"""


def chain_asset_keys() -> list[dg.AssetKey]:
    return sorted(dump_chain_job.selection.resolve(defs.resolve_asset_graph()))


def chain_steps() -> set[str]:
    return set(defs.resolve_job_def("dump_chain").graph.node_dict)


def chain_checks() -> set[str]:
    job = defs.resolve_job_def("dump_chain")
    return {key.to_user_string() for key in job.asset_layer.asset_graph.asset_check_keys}


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


def runs(services: DagsterServices, tags: dict[str, str]) -> list[dict]:
    filter_tags = [{"key": k, "value": v} for k, v in tags.items()]
    query = f"""query($tags: [ExecutionTag!]) {{
        runsOrError(filter: {{tags: $tags}}) {{ ... on Runs {{ results {{ {RUN_FIELDS} }} }} }} }}"""
    data = services.graphql(query, {"tags": filter_tags})
    return data["runsOrError"]["results"]


def wait_for_runs(services: DagsterServices, what: str, tags: dict[str, str], count: int) -> list[dict]:
    """Wait until `count` runs with `tags` finished; fail at once, with the step errors, if one failed."""

    def finished() -> list[dict] | None:
        found = runs(services, tags)
        for run in found:
            assert run["status"] != "FAILURE", f"{what}: run {run['runId']} failed: {failure_messages(run)}"
        done = [run for run in found if run["status"] == "SUCCESS"]
        return done if len(done) >= count else None

    return wait_for(what, finished, RUN_TIMEOUT, every=2, logs=services.logs)


def failure_messages(run: dict) -> list[str]:
    events = run["eventConnection"]["events"]
    return [
        f"{event.get('stepKey', 'run')}: {event['error']['message'] if 'error' in event else event['message']}"
        for event in events
        if event["__typename"] in ("ExecutionStepFailureEvent", "RunFailureEvent")
    ]


def tag(run: dict, key: str) -> str | None:
    return next((t["value"] for t in run["tags"] if t["key"] == key), None)


def run_partition(run: dict) -> str | None:
    """The one dump a run processed: a partition tag, or a backfill's one-partition range."""
    start = tag(run, "dagster/asset_partition_range_start")
    end = tag(run, "dagster/asset_partition_range_end")
    return tag(run, "dagster/partition") or (start if start == end else None)


def materialized_partitions(services: DagsterServices, key: dg.AssetKey) -> set[str]:
    data = services.graphql(
        """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
             assetPartitionStatuses { ... on DefaultPartitionStatuses { materializedPartitions } } } } }""",
        {"key": {"path": key.path}},
    )
    return set(data["assetNodeOrError"]["assetPartitionStatuses"]["materializedPartitions"])


def assert_published(output: Path, dump: str) -> None:
    assert selection_path(output, dump).is_file()
    for bucket, folder in bucket_dump_dirs(output, dump, SEED_POLICY).items():
        assert list(folder.glob("*.parquet")), f"{dump}: nothing published for bucket {bucket} in {folder}"


def assert_whole_chain_succeeded(run: dict) -> None:
    """Every step of the job ran and succeeded in this one run, and every asset check passed in it."""
    steps = {stat["stepKey"]: stat["status"] for stat in run["stepStats"]}
    assert steps == {step: "SUCCESS" for step in chain_steps()}, f"run {run['runId']}: {steps}"
    checks = {
        dg.AssetCheckKey(dg.AssetKey(e["evaluation"]["assetKey"]["path"]), e["evaluation"]["checkName"])
        .to_user_string(): e["evaluation"]["success"]
        for e in run["eventConnection"]["events"]
        if e["__typename"] == "AssetCheckEvaluationEvent"
    }
    assert checks == {check: True for check in chain_checks()}, f"run {run['runId']}: {checks}"


@pytest.fixture(scope="module")
def sensor_run(services, world) -> dict:
    """A dump dropped into the running deployment's source folder, processed by the sensor."""
    write_sample_dump(world["source"], SENSOR_DUMP, rows=ROWS, files=2)
    tags = {"dagster/sensor_name": "new_dumps", "dagster/partition": SENSOR_DUMP}
    [run] = wait_for_runs(services, "the sensor's run", tags, 1)
    return run


@pytest.fixture(scope="module")
def backfill_runs(services, world, sensor_run) -> tuple[str, list[dict]]:
    """With the sensor turned off (as in the UI), two more dumps backfilled through GraphQL."""
    stop_sensor(services)
    for dump in BACKFILL_DUMPS:
        write_sample_dump(world["source"], dump, rows=ROWS, files=1)
    data = services.graphql(
        """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
             __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
        {
            "params": {
                "assetSelection": [{"path": key.path} for key in chain_asset_keys()],
                "partitionNames": list(BACKFILL_DUMPS),
            }
        },
    )
    result = data["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", result
    backfill_id = result["backfillId"]
    return backfill_id, wait_for_runs(
        services, "the backfill's runs", {"dagster/backfill": backfill_id}, len(BACKFILL_DUMPS)
    )


def sensor_state(services: DagsterServices) -> dict:
    data = services.graphql(
        """{ sensorOrError(sensorSelector: {repositoryName: "__repository__",
               repositoryLocationName: "fw_assets", sensorName: "new_dumps"}) {
             ... on Sensor { sensorState { id selectorId status } } } }"""
    )
    return data["sensorOrError"]["sensorState"]


def stop_sensor(services: DagsterServices) -> None:
    state = sensor_state(services)
    data = services.graphql(
        """mutation($origin: String, $selector: String) {
             stopSensor(jobOriginId: $origin, jobSelectorId: $selector) {
               ... on StopSensorMutationResult { instigationState { status } } } }""",
        {"origin": state["id"], "selector": state["selectorId"]},
    )
    assert data["stopSensor"]["instigationState"]["status"] == "STOPPED"


def test_the_deployment_runs_on_the_repos_instance_config(services):
    config = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
    data = services.graphql(
        """{ instance { runQueueConfig { maxConcurrentRuns } poolConfig { poolGranularity defaultPoolLimit }
             daemonHealth { allDaemonStatuses { daemonType required healthy } } } }"""
    )["instance"]
    assert data["runQueueConfig"]["maxConcurrentRuns"] == config["concurrency"]["runs"]["max_concurrent_runs"]
    assert data["poolConfig"] == {
        "poolGranularity": config["concurrency"]["pools"]["granularity"],
        "defaultPoolLimit": config["concurrency"]["pools"]["default_limit"],
    }
    assert sensor_state(services)["status"] in ("RUNNING", "STOPPED")  # the sensor is loaded

    def healthy() -> bool:
        statuses = services.graphql(
            "{ instance { daemonHealth { allDaemonStatuses { daemonType required healthy } } } }"
        )["instance"]["daemonHealth"]["allDaemonStatuses"]
        return all(s["healthy"] for s in statuses if s["required"])

    wait_for("every required daemon to report healthy", healthy, 120, every=2, logs=services.logs)


def test_a_dump_dropped_into_the_source_folder_is_processed_by_the_sensor(services, world, sensor_run):
    assert_whole_chain_succeeded(sensor_run)
    fingerprint = tag(sensor_run, FINGERPRINT_TAG)
    assert fingerprint and fingerprint in tag(sensor_run, "dagster/run_key")
    assert_published(world["output"], SENSOR_DUMP)
    for key in chain_asset_keys():
        assert SENSOR_DUMP in materialized_partitions(services, key), key.to_user_string()
    # The sensor went on ticking and requested nothing more for the same files.
    assert len(runs(services, {"dagster/sensor_name": "new_dumps"})) == 1


def test_a_backfill_of_two_dumps_is_two_runs_each_holding_the_whole_chain(services, world, backfill_runs):
    backfill_id, finished = backfill_runs
    assert len(runs(services, {"dagster/backfill": backfill_id})) == len(BACKFILL_DUMPS)
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

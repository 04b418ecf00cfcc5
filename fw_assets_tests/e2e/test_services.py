"""End to end with the real services: dagster-webserver and dagster-daemon on 127.0.0.1 over
workspace.yaml and the repo's dagster.yaml, a generated dump dropped into the source folder, a
backfill launched by `python -m fw_assets.backfill` (the UI's GraphQL), a dump materialized from the
CLI, and a headless Chromium looking at the UI. Each dump takes a signing run, then a decision run
that Dagster's declarative automation starts. Every dump's check results must show on that dump's
own materialization. The CLI's dump is earlier than the backfilled ones (downloaded late): the UI
shows their decisions stale until the automation decides them again, once."""

import ast
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from bench.dagster_services import (
    BIN,
    DECISIONS_SENSOR,
    DUMP_CLI_SELECTION,
    PROBE_SCORING_SENSOR,
    REPO_ROOT,
    DagsterServices,
    HeadlessChromium,
    assert_check_results_belong_to_their_dumps,
    assert_every_asset_materialized,
    assert_steps_succeeded,
    backfill_again_then_cli,
    chain_asset_keys,
    dagster_cli,
    decided_after,
    find_chromium,
    kept_asset_keys,
    signing_asset_keys,
    tag,
    wait_for,
    why_each_requested,
)
from fw_assets import settings
from fw_assets.automation.new_dumps import FINGERPRINT_TAG
from fw_assets.dedup.band_key_index import band_key_index
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.demo import write_instance_yaml
from fw_assets.partitions import known_dumps
from fw_assets.paths import bucket_dump_dirs, selection_path
from fw_assets.sampling_policy import SEED_POLICY
from fw_assets.synthetic import write_sample_dump
from fw_assets.tokenizing.tokenized import tokenized

pytestmark = pytest.mark.e2e

SENSOR_DUMP = "CC-MAIN-2013-20"
BACKFILL_DUMPS = ("CC-MAIN-2014-10", "CC-MAIN-2014-15")
CLI_DUMP = "CC-MAIN-2013-48"  # between the sensor's dump and the backfilled ones
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


def deployment_env(world: dict[str, Path]) -> dict[str, str]:
    return {
        "FW_SOURCE_DIR": str(world["source"]),
        "FW_OUTPUT_DIR": str(world["output"]),
        settings.SENSOR_INTERVAL_ENV: "5",
        settings.AUTOMATION_INTERVAL_ENV: "3",
    }


@pytest.fixture(scope="module")
def services(world):
    with DagsterServices.running(world["home"], deployment_env(world), sensors_off=(PROBE_SCORING_SENSOR,)) as running:
        yield running


def materialized_partitions(services: DagsterServices, key) -> set[str]:
    return services.partition_statuses(key)["materializedPartitions"]


def assert_published(output: Path, dump: str) -> None:
    assert selection_path(output, dump).is_file()
    for bucket, folder in bucket_dump_dirs(output, dump, SEED_POLICY).items():
        assert list(folder.glob("*.parquet")), f"{dump}: nothing published for bucket {bucket} in {folder}"


def decision_runs(services: DagsterServices, dump: str | None = None) -> list[dict]:
    tags = {"dagster/sensor_name": DECISIONS_SENSOR, **({"dagster/partition": dump} if dump else {})}
    return services.runs(tags)


@dataclass(frozen=True)
class DumpRuns:
    signing: dict
    decisions: dict


@pytest.fixture(scope="module")
def sensor_run(services, world) -> DumpRuns:
    """A dump dropped into the running deployment's source folder: signed by the sensor's run,
    decided and tokenized by the run the automation starts after it."""
    write_sample_dump(world["source"], SENSOR_DUMP, rows=ROWS, files=2)
    tags = {"dagster/sensor_name": "new_dumps", "dagster/partition": SENSOR_DUMP}
    [signing] = services.wait_for_runs("the sensor's run", tags, 1)
    [decisions] = services.wait_for_runs(
        "the decisions' run", {"dagster/sensor_name": DECISIONS_SENSOR, "dagster/partition": SENSOR_DUMP}, 1
    )
    return DumpRuns(signing, decisions)


@pytest.fixture(scope="module")
def backfill_runs(services, world, sensor_run) -> tuple[str, list[dict], list[dict]]:
    """With the sensor turned off (as in the UI), two more dumps backfilled by one CLI command:
    (the backfill's id, its signing runs, the decision runs that followed)."""
    services.stop_sensor("new_dumps")
    for dump in BACKFILL_DUMPS:
        write_sample_dump(world["source"], dump, rows=ROWS, files=1)
    env = {**os.environ, **deployment_env(world), "DAGSTER_HOME": str(world["home"])}
    launched = subprocess.run([str(BIN / "python"), "-m", "fw_assets.backfill", *BACKFILL_DUMPS, "--url", services.url],
                              env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert launched.returncode == 0, launched.stderr
    backfill_id = launched.stdout.split()[1].rstrip(":")
    assert f"{services.url}/runs/b/{backfill_id}" in launched.stdout
    signing = services.wait_for_runs("the backfill's runs", {"dagster/backfill": backfill_id}, len(BACKFILL_DUMPS))
    decisions = [run for dump in BACKFILL_DUMPS for run in services.wait_for_runs(
        f"the decisions of {dump}", {"dagster/sensor_name": DECISIONS_SENSOR, "dagster/partition": dump}, 1)]
    return backfill_id, signing, decisions


def test_the_deployment_runs_on_the_repos_instance_config(services):
    services.assert_serves_instance_config(REPO_ROOT / "dagster.yaml")
    assert services.sensor_state("new_dumps")["status"] in ("RUNNING", "STOPPED")  # the sensor is loaded


def test_a_dump_dropped_into_the_source_folder_is_signed_by_the_sensor_then_decided(services, world, sensor_run):
    assert_steps_succeeded(sensor_run.signing, signing_asset_keys())
    assert_steps_succeeded(sensor_run.decisions, kept_asset_keys())
    fingerprint = tag(sensor_run.signing, FINGERPRINT_TAG)
    assert fingerprint and fingerprint in tag(sensor_run.signing, "dagster/run_key")
    assert_published(world["output"], SENSOR_DUMP)
    for key in chain_asset_keys():
        assert SENSOR_DUMP in materialized_partitions(services, key), key.to_user_string()
    # The sensor went on ticking and requested nothing more for the same files.
    assert len(services.runs({"dagster/sensor_name": "new_dumps"})) == 1


@dataclass(frozen=True)
class LateDump:
    """The CLI's run of a dump earlier than the backfilled ones, and what the UI said of each
    dump's decisions just before and just after it (with the decisions' automation paused meanwhile)."""

    run: dict
    before: dict[str, tuple[str, list[str]]]
    after: dict[str, tuple[str, list[str]]]
    earlier_reruns: set[str]  # ids of the decision runs launched before


def decisions_staleness(services: DagsterServices, dumps) -> dict[str, tuple[str, list[str]]]:
    return {dump: services.stale_status(deduplicated.key, dump) for dump in dumps}


def all_current(services: DagsterServices, dumps) -> dict | None:
    """Each dump's decisions as the UI shows them, once no run is queued or running and none is stale."""
    if any(run["status"] not in ("SUCCESS", "FAILURE", "CANCELED") for run in services.runs({})):
        return None
    staleness = decisions_staleness(services, dumps)
    return staleness if all(status == "FRESH" for status, _ in staleness.values()) else None


@pytest.fixture(scope="module")
def cli_run(services, world, backfill_runs) -> LateDump:
    """A third dump materialized from the CLI (`dagster asset materialize`, its whole chain) beside
    the running services, after the decisions of the dumps before it settled, with the decisions'
    automation paused meanwhile to see what the UI says of them."""
    decided = [SENSOR_DUMP, *BACKFILL_DUMPS]
    before = wait_for("every decision to be current", lambda: all_current(services, decided), 180,
                      every=3, logs=services.logs)
    services.stop_sensor(DECISIONS_SENSOR)
    try:  # the sensor back on whatever happens, or later tests wait for decisions that never come
        earlier_reruns = {run["runId"] for run in decision_runs(services)}
        write_sample_dump(world["source"], CLI_DUMP, rows=ROWS, files=1)
        env = {**os.environ, **deployment_env(world), "DAGSTER_HOME": str(world["home"])}
        dagster_cli("asset", "materialize", "-m", "fw_assets.definitions", "--select", DUMP_CLI_SELECTION,
                    "--partition", CLI_DUMP, env=env, cwd=world["home"])
        after = decisions_staleness(services, [*decided, CLI_DUMP])
    finally:
        services.start_sensor(DECISIONS_SENSOR)
    [run] = services.runs({"dagster/partition": CLI_DUMP})
    return LateDump(run, before, after, earlier_reruns)


def test_a_backfill_of_two_dumps_from_the_cli_signs_each_in_a_run_then_decides_each_once(
    services, world, backfill_runs
):
    backfill_id, signing, decisions = backfill_runs
    assert len(services.runs({"dagster/backfill": backfill_id})) == len(BACKFILL_DUMPS)
    # Dagster's default backfill policy: each run is one dump, tagged as a partition (not a range)
    assert sorted(tag(run, "dagster/partition") for run in signing) == sorted(BACKFILL_DUMPS)
    assert not any(tag(run, "dagster/asset_partition_range_start") for run in signing)
    for run in signing:
        assert_steps_succeeded(run, signing_asset_keys())
    for run in decisions:
        assert_steps_succeeded(run, kept_asset_keys())
    assert sorted(tag(run, "dagster/partition") for run in decision_runs(services)) == sorted(
        [SENSOR_DUMP, *BACKFILL_DUMPS]
    )
    for dump in BACKFILL_DUMPS:
        assert_published(world["output"], dump)


def test_each_dump_of_the_sensor_and_the_backfill_has_its_checks_on_its_own_materialization(
    services, sensor_run, backfill_runs
):
    dumps = [SENSOR_DUMP, *BACKFILL_DUMPS]
    assert_every_asset_materialized(services, dumps)
    assert_check_results_belong_to_their_dumps(services, dumps)


def test_a_dump_materialized_from_the_cli_has_its_checks_on_its_own_materialization(
    services, world, cli_run, cli_reruns
):
    assert_steps_succeeded(cli_run.run, chain_asset_keys())
    assert_published(world["output"], CLI_DUMP)
    dumps = [SENSOR_DUMP, *BACKFILL_DUMPS, CLI_DUMP]
    assert_every_asset_materialized(services, dumps)
    assert_check_results_belong_to_their_dumps(services, dumps)


def test_the_lineage_shows_each_dumps_decisions_reading_the_band_keys_of_every_earlier_dump(services):
    data = services.graphql(
        """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode {
             dependencies { asset { assetKey { path } isMaterializable groupName
               dependencies { asset { assetKey { path } } } } partitionMapping { className description } } } } }""",
        {"key": {"path": deduplicated.key.path}},
    )
    deps = {dg.AssetKey(d["asset"]["assetKey"]["path"]): d for d in data["assetNodeOrError"]["dependencies"]}
    assert set(deps) == {dg.AssetKey("minhash"), band_key_index.key}
    assert deps[dg.AssetKey("minhash")]["partitionMapping"] is None  # its own dump's
    index = deps[band_key_index.key]
    # materialized last in each dump's signing run, so Dagster waits for it
    assert index["asset"]["isMaterializable"] and index["asset"]["groupName"] == "fineweb_edu"
    assert [d["asset"]["assetKey"]["path"] for d in index["asset"]["dependencies"]] == [["minhash"]]
    assert index["partitionMapping"]["className"] == "StaticPartitionMapping"
    mapping = ast.literal_eval(index["partitionMapping"]["description"].split("\n", 1)[1])
    for dump in (CLI_DUMP, *BACKFILL_DUMPS):
        read = {earlier for earlier, later in mapping.items() if dump in later}
        assert read == {d for d in known_dumps() if d < dump}, dump


@pytest.fixture(scope="module")
def cli_reruns(services, cli_run) -> list[dict]:
    """The decision runs the automation launches once the CLI's earlier dump makes the later dumps'
    decisions stale, each ended, and every dump's decisions current again."""
    def reruns() -> list[dict] | None:
        # Runs read after every run ended: read before, one could still be short of its last steps.
        if not all_current(services, [SENSOR_DUMP, CLI_DUMP, *BACKFILL_DUMPS]):
            return None
        return [r for r in decision_runs(services) if r["runId"] not in cli_run.earlier_reruns] or None

    return wait_for("the automation to decide the later dumps again", reruns, 240, every=3, logs=services.logs)


def test_an_earlier_dump_materialized_late_makes_later_decisions_stale_until_decided_again_once(
    services, cli_run, cli_reruns
):
    assert {dump: status for dump, (status, _) in cli_run.before.items()} == dict.fromkeys(
        (SENSOR_DUMP, *BACKFILL_DUMPS), "FRESH"
    )
    assert cli_run.after[SENSOR_DUMP] == cli_run.after[CLI_DUMP] == ("FRESH", [])
    for dump in BACKFILL_DUMPS:
        assert cli_run.after[dump] == ("STALE", [f"band_key_index[{CLI_DUMP}]: has a new data version"])
    def why() -> list[str]:  # read only when an assertion fails: a GraphQL query per condition node
        return why_each_requested(services, [deduplicated.key, tokenized.key], BACKFILL_DUMPS)

    assert sorted(tag(run, "dagster/partition") for run in cli_reruns) == sorted(BACKFILL_DUMPS), why()  # one each
    for run in cli_reruns:
        assert {s["stepKey"]: s["status"] for s in run["stepStats"]} == dict.fromkeys(
            ("deduplicated", "tokenized", "deduplicated_published_files", "tokenized_published_files"), "SUCCESS"
        ), why()


@pytest.fixture(scope="module")
def chromium():
    executable = find_chromium()
    if executable is None:
        pytest.fail("Chromium not found: `apt-get install -y chromium` (.ci/run installs it)")
    # Wide enough that the six-asset chain (drawn left to right) fits at a zoom where Dagster draws
    # each node's partition counts ("% filled"); 1600 px wide, it drew no node text.
    browser = HeadlessChromium(executable, width=2400)
    try:
        yield browser
    finally:
        browser.close()


def test_the_ui_shows_the_signing_group_and_the_materialized_dumps(services, cli_run, cli_reruns, chromium):
    assets = [key.to_user_string() for key in signing_asset_keys()]
    chromium.open(f"{services.url}/locations/fw_assets/asset-groups/fineweb_edu")
    try:
        graph = chromium.wait_for_text(
            "the asset graph of group fineweb_edu, loaded",
            ["fineweb_edu", *assets, "% filled"],
            absent=("Loading",),
        )
    finally:
        shot = chromium.screenshot(ARTIFACTS / "asset-graph.png")
    print(f"asset graph screenshot: {shot}")
    assert graph.count(f"{len(known_dumps())} partitions") == len(assets)
    assert "Materialize all" in graph

    dumps = [SENSOR_DUMP, *BACKFILL_DUMPS, CLI_DUMP]
    chromium.open(f"{services.url}/assets/bucketed?view=partitions")
    partitions = chromium.wait_for_text(
        "the bucketed partitions view", [f"Materialized ({len(dumps)})", *dumps]
    )
    shot = chromium.screenshot(ARTIFACTS / "bucketed-partitions.png")
    print(f"partitions screenshot: {shot}")
    assert "Failed (0)" in partitions


def test_a_checks_page_shows_one_dumps_result_on_that_dumps_materialization(services, cli_run, chromium):
    """raw → Checks → key_columns → Partitions → a backfilled dump: passed, in the dump's run,
    targeting the materialization of that same run."""
    dump = BACKFILL_DUMPS[0]
    run_id = services.materialization_run(dg.AssetKey("raw"), dump)
    chromium.open(f"{services.url}/assets/raw?view=checks&checkDetail=key_columns")
    chromium.click("the check's Partitions tab", "button[role=tab]", "Partitions")  # <a> tabs are the asset's
    chromium.click(f"partition {dump} in the list", f'[data-tooltip="{dump}"]')
    # the selected dump's status tag, then its latest execution, its run and its target materialization
    chromium.wait_for_text(
        f"key_columns of {dump}", ["Passed\nLatest execution", "Target materialization", run_id[:8]]
    )
    shot = chromium.screenshot(ARTIFACTS / f"raw-key_columns-{dump}.png")
    print(f"check page screenshot: {shot}")
    # "Target materialization" links to the run that materialized this dump
    assert any(link.endswith(f"/runs/{run_id}") for link in chromium.links()), chromium.links()


@dataclass(frozen=True)
class RepeatedDumps:
    """The first two dumps backfilled again (same files: the same band keys), then the third
    materialized from the CLI, with the decisions' automation on throughout."""

    runs: list[dict]  # every run launched meanwhile
    settled: dict[str, tuple[str, list[str]]]  # what the UI then says of each dump's decisions
    records: tuple[dict[str, str], dict[str, str]]  # the dumps' generation records before and after


def dump_records(output: Path) -> dict[str, str]:
    """Each dump publication's generation record as it is on disk."""
    return {p.name: p.read_text() for p in sorted((output / "published").glob("*CC-MAIN-*.json"))}


@pytest.fixture(scope="module")
def repeated(services, world, cli_run) -> RepeatedDumps:
    dumps = [SENSOR_DUMP, CLI_DUMP, *BACKFILL_DUMPS]
    env = {**os.environ, **deployment_env(world), "DAGSTER_HOME": str(world["home"])}
    wait_for("every run to end", lambda: decided_after(services, 0), 300, every=3, logs=services.logs)
    before = dump_records(world["output"])
    runs = backfill_again_then_cli(services, dumps[:3], env, world["home"])
    return RepeatedDumps(runs, decisions_staleness(services, dumps), (before, dump_records(world["output"])))


def test_dumps_signed_again_to_the_same_band_keys_re_run_nothing(services, world, repeated):
    # the backfill's two runs and the CLI's, one each: no decision run
    assert sorted(tag(r, "dagster/partition") for r in repeated.runs) == [SENSOR_DUMP, CLI_DUMP, BACKFILL_DUMPS[0]]
    before, after = repeated.records
    assert after == before  # every step found its output unchanged: nothing was published again
    assert not [r for r in repeated.runs if tag(r, "dagster/sensor_name")]
    assert repeated.settled == dict.fromkeys(repeated.settled, ("FRESH", []))  # what the UI shows


def test_after_the_repeated_runs_every_check_is_on_its_dumps_latest_materialization(services, repeated):
    assert_check_results_belong_to_their_dumps(services, [SENSOR_DUMP, CLI_DUMP, *BACKFILL_DUMPS])

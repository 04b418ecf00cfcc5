"""The production instance for real: deploy/dagster.postgres.yaml as DAGSTER_HOME's dagster.yaml on a
real PostgreSQL server (127.0.0.1, a free port, a password with URL-special characters), used as
docs/operations.md says: `dagster instance migrate`, one dump materialized from the CLI, then the
webserver and the daemon, and two dumps backfilled the way the UI launches a backfill; then the
first two backfilled again and the third materialized from the CLI, which re-runs nothing."""

import os
import shutil
import subprocess

import pytest
import yaml

from bench.dagster_services import (
    BIN,
    DECISIONS_SENSOR,
    DUMP_CLI_SELECTION,
    PROBE_SCORING_SENSOR,
    REPO_ROOT,
    DagsterServices,
    assert_check_results_belong_to_their_dumps,
    assert_every_asset_materialized,
    assert_steps_succeeded,
    backfill_again_then_cli,
    chain_asset_keys,
    dagster_cli,
    describe_runs,
    kept_asset_keys,
    migrate_instance,
    run_partition,
    signing_asset_keys,
    tag,
    why_each_requested,
)
from fw_assets.dedup.deduplicated import deduplicated
from fw_assets.synthetic import write_sample_dump
from fw_assets_tests.support.postgres_server import PostgresServer, find_postgres_binaries

pytestmark = pytest.mark.e2e

PRODUCTION_YAML = REPO_ROOT / "deploy" / "dagster.postgres.yaml"
CLI_DUMP = "CC-MAIN-2013-20"
BACKFILL_DUMPS = ["CC-MAIN-2013-48", "CC-MAIN-2014-10"]
ROWS = 1_200


@pytest.fixture(scope="module")
def database():
    binaries = find_postgres_binaries()
    if binaries is None:
        pytest.skip("PostgreSQL is not installed (no initdb/pg_ctl under /usr/lib/postgresql/*/bin or on "
                    "PATH): `apt-get install postgresql`, as .ci/run does where apt-get is available")
    server = PostgresServer(binaries)
    try:
        yield server.database
    finally:
        server.stop()


@pytest.fixture(scope="module")
def world(tmp_path_factory, database) -> dict:
    root = tmp_path_factory.mktemp("postgres-e2e")
    home, source, output = root / "dagster_home", root / "fineweb-edu", root / "fineweb"
    for folder in (home, source / "data", output):
        folder.mkdir(parents=True)
    shutil.copy(PRODUCTION_YAML, home / "dagster.yaml")
    env = {
        **os.environ,
        **database.dagster_env(),
        "DAGSTER_HOME": str(home),
        "FW_SOURCE_DIR": str(source),
        "FW_OUTPUT_DIR": str(output),
        # What the README tells operators to set on the daemon (a backfill survives a database outage).
        "DAGSTER_BACKFILL_RETRY_DEFINITION_CHANGED_ERROR": "1",
    }
    return {"home": home, "source": source, "env": env}


@pytest.fixture(scope="module")
def migrated(world) -> str:
    return migrate_instance(world["env"])


@pytest.fixture(scope="module")
def cli_materialized(world, migrated) -> str:
    write_sample_dump(world["source"], CLI_DUMP, rows=ROWS, files=2)
    return dagster_cli("asset", "materialize", "-m", "fw_assets.definitions", "--select", DUMP_CLI_SELECTION,
                       "--partition", CLI_DUMP, env=world["env"], cwd=world["home"])


@pytest.fixture(scope="module")
def services(world, cli_materialized):
    # Both switched off before the daemon starts: the dumps are backfilled from the UI, and the
    # shipped recipe's probe would score each dump in a run of its own.
    running = DagsterServices(world["home"], world["env"], sensors_off=("new_dumps", PROBE_SCORING_SENSOR))
    try:
        running.wait_until_ready()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def backfill_runs(services, world) -> list[dict]:
    """With the sensor off, two more dumps: Materialize all → pick both → Launch backfill."""
    for dump in BACKFILL_DUMPS:
        write_sample_dump(world["source"], dump, rows=ROWS, files=1)
    backfill_id = services.launch_backfill(signing_asset_keys(), BACKFILL_DUMPS)
    signing = services.wait_for_runs("the backfill's runs", {"dagster/backfill": backfill_id}, len(BACKFILL_DUMPS))
    decisions = [run for dump in BACKFILL_DUMPS for run in services.wait_for_runs(
        f"the decisions of {dump}", {"dagster/sensor_name": DECISIONS_SENSOR, "dagster/partition": dump}, 1)]
    return signing + decisions


def test_the_cli_loads_the_production_instance_and_migrates_it(world, migrated):
    info = dagster_cli("instance", "info", env=world["env"], cwd=world["home"])
    for storage in ("run_storage: PostgresRunStorage", "event_log_storage: PostgresEventLogStorage",
                    "schedule_storage: PostgresScheduleStorage"):
        assert storage in info
    schema = yaml.safe_load(info.split("Storage schema state:")[1].split("\n", 2)[2])["schema"]
    assert all(state["current"] == state["latest"] for state in schema.values()), schema


def test_without_a_dagster_pg_variable_the_cli_names_it(world, migrated):
    env = {name: value for name, value in world["env"].items() if name != "DAGSTER_PG_PORT"}
    completed = subprocess.run([str(BIN / "dagster"), "instance", "info"], env=env, cwd=world["home"],
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode != 0
    assert 'environment variable "DAGSTER_PG_PORT" which is not set' in completed.stderr


def test_a_dump_materialized_from_the_cli_is_in_the_production_history(services, cli_materialized):
    assert_every_asset_materialized(services, [CLI_DUMP])
    # the CLI's run, not one the daemon's automation launched for the dump
    [run] = [r for r in services.runs({"dagster/partition": CLI_DUMP}) if not tag(r, "dagster/sensor_name")]
    assert_steps_succeeded(run, chain_asset_keys())


def test_the_webserver_and_daemon_serve_the_production_instance(services):
    services.assert_serves_instance_config(PRODUCTION_YAML)


def test_a_backfill_of_two_dumps_runs_through_the_daemon(services, backfill_runs):
    signing = [run for run in backfill_runs if not tag(run, "dagster/sensor_name")]
    decisions = [run for run in backfill_runs if tag(run, "dagster/sensor_name") == DECISIONS_SENSOR]
    assert sorted(map(run_partition, signing)) == sorted(map(run_partition, decisions)) == BACKFILL_DUMPS
    for run in signing:
        assert_steps_succeeded(run, signing_asset_keys())
    for run in decisions:
        assert_steps_succeeded(run, kept_asset_keys())
    assert_every_asset_materialized(services, [CLI_DUMP, *BACKFILL_DUMPS])


def test_every_check_result_belongs_to_its_dumps_materialization(services, backfill_runs):
    assert_check_results_belong_to_their_dumps(services, [CLI_DUMP, *BACKFILL_DUMPS])


def test_a_repeated_backfill_then_a_cli_run_re_runs_nothing_and_keeps_every_check_on_its_dump(
    services, world, backfill_runs
):
    dumps = [CLI_DUMP, *BACKFILL_DUMPS]
    runs = backfill_again_then_cli(services, dumps, world["env"], world["home"])
    decided = [run_partition(run) for run in runs if tag(run, "dagster/sensor_name") == DECISIONS_SENSOR]
    assert sorted(run_partition(run) for run in runs) == dumps, "\n".join([  # no decision run
        *describe_runs(runs), *why_each_requested(services, [deduplicated.key], decided)])
    assert_check_results_belong_to_their_dumps(services, dumps)

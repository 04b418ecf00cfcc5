"""The corpus on many hosts, whatever order its dumps arrive in: deploy/celery/local.sh with three
workers (each a host of its own), the `new_dumps` sensor on, dumps landing in the source folder one
after another, first newest first, then (later dumps) in a random order. Every dump is signed on
whichever host is free, and decided and tokenized exactly once, once the earlier dumps in flight
are signed: no run fails, no token file is published from decisions that change later, and every
output is byte for byte what one machine publishes running the dumps in crawl order. Then one
backfill of every dump, with the sensors on as the docs say: its runs redo nothing and decide
nothing again, so each dump's chain ran once."""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from bench.celery_local import DeployedWebserver, LocalDeployment, backfill_status
from bench.dagster_services import tag, wait_for, why_each_requested
from fw_assets import settings
from fw_assets.paths import generation_record_path, publication_name
from fw_assets.resources import Warehouse
from fw_assets.synthetic import write_sample_dump
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.postgres_server import find_postgres_binaries
from fw_assets_tests.support.runs import CHAIN, materialize_dump
from fw_assets_tests.support.trees import published_data, without_probe_losses

pytestmark = [pytest.mark.e2e, pytest.mark.needs_extra("celery")]

# Three each: newest first, every later dump is decided while an earlier one is in flight; three in a
# random order are one of six orders, each the seed picks as likely.
NEWEST_FIRST = ("CC-MAIN-2013-20", "CC-MAIN-2013-48", "CC-MAIN-2014-10")[::-1]
RANDOM_ORDER = ("CC-MAIN-2014-15", "CC-MAIN-2014-23", "CC-MAIN-2014-35")
ROWS = 600
WORKERS = 3
CORES_PER_WORKER = 1  # DuckDB's row order follows its threads: one machine is compared at the same
LANDING_GAP_SECONDS = 1.0  # between two dumps landing: downloads finishing one after another
SETTLE_TIMEOUT = 600
KEPT = ("deduplicated", "tokenized")


@dataclass
class World:
    root: Path
    staging: Path  # where a dump is written before it lands (same filesystem: it lands by rename)
    local: LocalDeployment
    webserver: DeployedWebserver


@pytest.fixture(scope="module")
def world():
    if shutil.which("redis-server") is None or find_postgres_binaries() is None:
        pytest.skip("needs Debian's redis-server and postgresql: apt-get install redis-server postgresql, "
                    "as .ci/run does")
    root = Path(tempfile.mkdtemp(prefix="fw-arrivals-e2e-"))
    root.chmod(0o755)  # PostgreSQL runs as the postgres user
    for name in ("source/data", "output", "staging", "one-machine"):
        (root / name).mkdir(parents=True)
    for dump in (*NEWEST_FIRST, *RANDOM_ORDER):
        write_sample_dump(root / "staging", dump, rows=ROWS, files=1)
    local = LocalDeployment(root / "home", root / "source", root / "output", WORKERS, CORES_PER_WORKER)
    local.env.update({settings.SENSOR_INTERVAL_ENV: "2", settings.AUTOMATION_INTERVAL_ENV: "2"})
    try:
        yield World(root, root / "staging", local, local.up())
    finally:
        local.down()
        shutil.rmtree(root, ignore_errors=True)


def land(world: World, dumps) -> None:
    """Each dump's folder moved into the source folder, one after another, as downloads finish."""
    for dump in dumps:
        os.rename(world.staging / "data" / dump, world.root / "source" / "data" / dump)
        time.sleep(LANDING_GAP_SECONDS)


def materializations(webserver: DeployedWebserver, asset: str, dump: str) -> list[dict]:
    data = webserver.graphql(
        """query($key: AssetKeyInput!, $partition: String!) { assetNodeOrError(assetKey: $key) {
             ... on AssetNode { assetMaterializations(partitions: [$partition], limit: 50) { runId timestamp } } } }""",
        {"key": {"path": [asset]}, "partition": dump},
    )
    return data["assetNodeOrError"]["assetMaterializations"]


def settled(world: World, dumps) -> list[dict] | None:
    """Every run, once each dump is tokenized, no run is left to finish, and the decisions'
    automation evaluated after the last run ended (so it requests nothing more)."""
    runs = world.webserver.runs({})
    if any(run["status"] not in ("SUCCESS", "FAILURE", "CANCELED") for run in runs):
        return None
    if not all(materializations(world.webserver, "tokenized", dump) for dump in dumps):
        return None
    ended = max(float(run_end(world.webserver, run["runId"])) for run in runs)
    tick = world.webserver.latest_ended_tick("decide_in_crawl_order")
    return runs if tick and tick["timestamp"] > ended + 1 else None


def run_end(webserver: DeployedWebserver, run_id: str) -> float:
    data = webserver.graphql("""query($id: ID!) { runOrError(runId: $id) { ... on Run { endTime } } }""",
                             {"id": run_id})
    return data["runOrError"]["endTime"] or 0.0


@dataclass(frozen=True)
class Arrival:
    dumps: tuple[str, ...]
    order: list[str]
    runs: list[dict]  # every run of these dumps


def arrive(world: World, dumps, order) -> Arrival:
    land(world, order)
    runs = wait_for(f"{', '.join(order)} to be signed, decided and tokenized", lambda: settled(world, dumps),
                    SETTLE_TIMEOUT, every=3, logs=world.local.logs)
    return Arrival(tuple(dumps), list(order), [r for r in runs if tag(r, "dagster/partition") in dumps])


@pytest.fixture(scope="module")
def newest_first(world) -> Arrival:
    return arrive(world, NEWEST_FIRST, list(NEWEST_FIRST))


@pytest.fixture(scope="module")
def random_order(world, newest_first) -> Arrival:
    order = list(RANDOM_ORDER)
    random.Random(int(os.environ.get("FW_ARRIVAL_SEED", "20261128"))).shuffle(order)
    return arrive(world, RANDOM_ORDER, order)


@dataclass(frozen=True)
class Backfill:
    records_before: dict[str, str]  # every generation record's digest before the backfill
    signing: list[dict]  # the backfill's runs
    after: list[dict]  # every run launched since the backfill, its own included


@pytest.fixture(scope="module")
def backfilled_again(world, random_order) -> Backfill:
    """Every dump backfilled by the one CLI command (`python -m fw_assets.backfill --all`), as a user
    who left the sensors on backfills the whole corpus."""
    records_before = generation_records(world)
    earlier = {run["runId"] for run in world.webserver.runs({})}
    env = {**world.local.env, "FW_WEBSERVER_PORT": world.webserver.url.rsplit(":", 1)[1]}
    launched = subprocess.run([sys.executable, "-m", "fw_assets.backfill", "--all"], env=env, capture_output=True,
                              text=True, timeout=120)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    backfill_id = launched.stdout.split()[1].rstrip(":")
    dumps = (*NEWEST_FIRST, *RANDOM_ORDER)
    wait_for("the backfill to end and the automation to evaluate after it",
             lambda: backfill_status(world.webserver, backfill_id) == "COMPLETED_SUCCESS" and settled(world, dumps),
             SETTLE_TIMEOUT, every=3, logs=world.local.logs)
    after = [run for run in world.webserver.runs({}) if run["runId"] not in earlier]
    return Backfill(records_before, [r for r in after if tag(r, "dagster/backfill") == backfill_id], after)


def generation_records(world: World) -> dict[str, str]:
    folder = generation_record_path(world.root / "output", "x").parent
    return {path.name: path.read_text() for path in sorted(folder.glob("*.json")) if "probe_loss" not in path.name}


def test_a_backfill_of_every_dump_with_the_sensors_on_runs_each_chain_once(world, backfilled_again):
    dumps = sorted((*NEWEST_FIRST, *RANDOM_ORDER))
    assert sorted(tag(run, "dagster/partition") for run in backfilled_again.signing) == dumps
    assert all(run["status"] == "SUCCESS" for run in backfilled_again.after), backfilled_again.after
    assert not [r for r in backfilled_again.after if tag(r, "dagster/sensor_name") == "decide_in_crawl_order"]
    assert generation_records(world) == backfilled_again.records_before  # nothing published again
    counts = {(asset, dump): len(materializations(world.webserver, asset, dump)) for asset in KEPT for dump in dumps}
    assert counts == dict.fromkeys(counts, 1)


@pytest.fixture(scope="module")
def one_machine(world, random_order) -> dict[str, str]:
    """Every dump materialized one after another in crawl order, in this process."""
    host = {"warehouse": Warehouse(threads=CORES_PER_WORKER), "tokenizer": TokenizerResource()}
    for dump in sorted((*NEWEST_FIRST, *RANDOM_ORDER)):
        materialize_dump(world.root / "source", world.root / "one-machine", dump, [*CHAIN, tokenized],
                         extra_resources=host)
    return without_probe_losses(published_data(world.root / "one-machine"))


def assert_decided_and_tokenized_once_without_a_failure(world: World, arrival: Arrival) -> None:
    failed = [(tag(r, "dagster/partition"), r["runId"]) for r in arrival.runs if r["status"] != "SUCCESS"]
    assert not failed, f"runs that did not succeed (landing order {arrival.order}): {failed}"
    counts = {(asset, dump): len(materializations(world.webserver, asset, dump))
              for asset in KEPT for dump in arrival.dumps}
    twice = [(asset, dump) for (asset, dump), n in counts.items() if n > 1]
    why = [line for asset, dump in twice for line in why_each_requested(world.webserver, [dg.AssetKey(asset)], [dump])]
    assert counts == dict.fromkeys(counts, 1), (f"landing order {arrival.order}: {counts}\n{timeline(world, arrival)}\n"
                                                + "\n".join(why))


def timeline(world: World, arrival: Arrival) -> str:
    """The arrival's runs, one line each in the order they started: dump, who asked, steps, host."""
    lines = []
    for run in arrival.runs:
        times = world.webserver.graphql(
            """query($id: ID!) { runOrError(runId: $id) { ... on Run { startTime endTime } } }""", {"id": run["runId"]}
        )["runOrError"]
        lines.append((times["startTime"] or 0, f"{times['startTime']:.1f}-{times['endTime'] or 0:.1f} "
                      f"{tag(run, 'dagster/partition')} {tag(run, 'dagster/sensor_name')} "
                      f"{[s['stepKey'] for s in run['stepStats']]} {tag(run, 'fw_assets/host')}"))
    return "\n".join(line for _, line in sorted(lines))


def assert_no_token_file_from_decisions_that_changed(world: World, arrival: Arrival) -> None:
    output = world.root / "output"
    for dump in arrival.dumps:
        decisions = json.loads(generation_record_path(output, publication_name("dedup", dump)).read_text())
        tokens = next(generation_record_path(output, "x").parent.glob(f"tokenized-*-{dump}.json"))
        read = json.loads(tokens.read_text())["inputs"][publication_name("dedup", dump)]["generation"]
        assert read == decisions["generation"], f"{dump}: tokenized from decisions {read}, published {decisions}"


def test_dumps_landing_newest_first_are_each_decided_and_tokenized_once(world, newest_first):
    assert_decided_and_tokenized_once_without_a_failure(world, newest_first)
    assert_no_token_file_from_decisions_that_changed(world, newest_first)
    hosts = {tag(r, "fw_assets/host") for r in newest_first.runs}
    assert len(hosts) > 1, f"every run on one host: {hosts}"


def test_dumps_landing_in_a_random_order_are_each_decided_and_tokenized_once(world, random_order):
    assert_decided_and_tokenized_once_without_a_failure(world, random_order)
    assert_no_token_file_from_decisions_that_changed(world, random_order)


def test_every_output_is_what_one_machine_publishes_in_crawl_order(world, random_order, one_machine):
    published = without_probe_losses(published_data(world.root / "output"))
    differing = sorted(p for p in published.keys() | one_machine.keys() if published.get(p) != one_machine.get(p))
    assert not differing, f"{len(differing)} files differ from one machine's in crawl order: {differing[:10]}"

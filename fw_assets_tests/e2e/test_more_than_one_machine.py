"""More than one machine, as a user runs it: deploy/celery/local.sh with two workers (each a host of
its own), three dumps backfilled from the UI's GraphQL, one worker's process group SIGKILLed during
a step; then the same dumps backfilled again while that worker is still gone, the worker started
while a run waits for it, and Redis restarted during a step. Each time every dump ends published
byte for byte as one machine publishes it, every check on its dump, no run left Started, no dump run
twice at once, and each run names its host; `down` then leaves no process behind."""

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.celery_local import (
    DeployedWebserver,
    LocalDeployment,
    alive,
    run_times,
    settled,
    started_with,
    step_under_way,
    unsettled,
)
from bench.dagster_services import attribution_problems, chain_checks, signing_asset_keys, tag, wait_for
from fw_assets.contracts.asset_checks import FORCE_TAG
from fw_assets.resources import Warehouse
from fw_assets.synthetic import write_sample_dump
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.deployment_folders import deployment_folders
from fw_assets_tests.support.postgres_server import find_postgres_binaries
from fw_assets_tests.support.runs import CHAIN, materialize_dump
from fw_assets_tests.support.trees import published_data, without_probe_losses

pytestmark = [pytest.mark.e2e, pytest.mark.needs_extra("celery")]

DUMPS = ("CC-MAIN-2013-20", "CC-MAIN-2013-48", "CC-MAIN-2014-10")
ROWS = 1_200
WORKERS = ("worker-1", "worker-2")
# DuckDB writes a bucket's rows in an order that depends on its thread count (and the minhash files
# follow that order): one machine is compared at the cores each worker has.
CORES_PER_WORKER = 1
SETTLE_TIMEOUT = 420  # runs, a lost host's detection and retry, and stale_dedup's re-decisions


@dataclass
class Deployment:
    local: LocalDeployment
    webserver: DeployedWebserver
    output: Path
    hosts_at_start: list


@pytest.fixture(scope="module")
def folders():
    with deployment_folders("fw-celery-e2e-") as paths:
        yield paths


@pytest.fixture(scope="module")
def deployment(folders):
    if shutil.which("redis-server") is None or find_postgres_binaries() is None:
        pytest.skip("needs Debian's redis-server and postgresql: "
                    "apt-get install redis-server postgresql, as .ci/run does")
    local = LocalDeployment(folders["home"], folders["source"], folders["output"], len(WORKERS), CORES_PER_WORKER)
    try:
        webserver = local.up()
        webserver.stop_sensor("new_dumps")  # the dumps are backfilled from the UI, the sensor off
        webserver.stop_probe_scoring()
        for dump in DUMPS:
            write_sample_dump(folders["source"], dump, rows=ROWS, files=1)
        yield Deployment(local, webserver, folders["output"], local.status())
    finally:
        local.down()


@pytest.fixture(scope="module")
def one_machine(folders, deployment) -> dict[str, str]:
    """The three dumps materialized one after another in this process: what one machine publishes."""
    host = {"warehouse": Warehouse(threads=CORES_PER_WORKER), "tokenizer": TokenizerResource()}
    for dump in DUMPS:
        materialize_dump(folders["source"], folders["one-machine"], dump, [*CHAIN, tokenized], extra_resources=host)
    return published_data(folders["one-machine"])


def wait_until_settled(deployment: Deployment) -> list[dict]:
    webserver = deployment.webserver
    try:
        return wait_for("every run to end and every decision to be current", lambda: settled(webserver, DUMPS),
                        SETTLE_TIMEOUT, every=3, logs=deployment.local.logs)
    except AssertionError as error:  # what was still waited for last: CI keeps an error's tail
        raise AssertionError(f"{error}\n--- still waited for ---\n{unsettled(webserver, DUMPS)}") from None


@dataclass(frozen=True)
class Kill:
    run_id: str
    step: str
    host: str
    at: float
    runs: list[dict]  # every run, settled


@pytest.fixture(scope="module")
def killed(deployment) -> Kill:
    backfill_id = deployment.webserver.launch_backfill(signing_asset_keys(), list(DUMPS))
    run, step, host = wait_for("a step under way on a worker",
                               lambda: step_under_way(deployment.webserver, backfill_id),
                               240, every=0.2, logs=deployment.local.logs)
    at = deployment.local.kill_host(host)
    return Kill(run["runId"], step, host, at, wait_until_settled(deployment))


@dataclass(frozen=True)
class RedisRestart:
    waiting_run: str  # the run that waited in Redis until the killed worker was started again
    runs: list[dict]  # every run, settled


@pytest.fixture(scope="module")
def redis_restarted(deployment, killed) -> RedisRestart:
    """With the killed worker still gone, the dumps backfilled again: one run waits in Redis for a
    worker until `up` starts that worker again; Redis is restarted while a step is under way."""
    webserver, local = deployment.webserver, deployment.local
    # forced: the dumps are unchanged, and their steps would end before Redis could restart under one
    backfill_id = webserver.launch_backfill(signing_asset_keys(), list(DUMPS), {FORCE_TAG: "true"})

    def waiting_for_a_worker() -> str | None:
        runs = webserver.runs({"dagster/backfill": backfill_id})
        return next((r["runId"] for r in runs if r["status"] == "STARTING" and not tag(r, "fw_assets/host")), None)

    waiting = wait_for("a run sent to Redis with no worker free", waiting_for_a_worker, 240, every=0.5, logs=local.logs)
    local.up()
    wait_for("a step under way", lambda: step_under_way(webserver, backfill_id), 240, every=0.2, logs=local.logs)
    local.restart_redis()
    return RedisRestart(waiting, wait_until_settled(deployment))


def assert_every_dump_as_one_machine_publishes_it(deployment: Deployment, one_machine: dict[str, str]) -> None:
    published, one_machine = without_probe_losses(published_data(deployment.output)), without_probe_losses(one_machine)
    differing = sorted(
        path for path in one_machine.keys() | published.keys() if one_machine.get(path) != published.get(path)
    )
    assert not differing, f"{len(differing)} files differ from one machine's: {differing[:10]}"


def assert_every_check_on_its_dump(deployment: Deployment) -> None:
    problems = [
        p for check in chain_checks() for dump in DUMPS for p in attribution_problems(deployment.webserver, check, dump)
    ]
    assert not problems, "\n".join(problems)


def assert_no_dump_ran_twice_at_once(deployment: Deployment, runs: list[dict]) -> None:
    spans = {}
    for run in runs:
        times = run_times(deployment.webserver, run["runId"])
        if times["startTime"]:
            span = (times["startTime"], times["endTime"], run["runId"])
            spans.setdefault(tag(run, "dagster/partition"), []).append(span)
    for dump, intervals in spans.items():
        intervals.sort()
        for (_, end, first), (start, _, second) in zip(intervals, intervals[1:]):
            assert end <= start, f"{dump}: run {second} started before run {first} ended"


def test_the_killed_hosts_run_is_failed_by_run_monitoring_and_retried_on_the_live_host(deployment, killed):
    lost = run_times(deployment.webserver, killed.run_id)
    assert lost["status"] == "FAILURE"
    [failure] = [r for r in killed.runs if r["runId"] == killed.run_id]
    assert any(f"Lost the run's host {killed.host}" in message for message in failure_messages(failure))
    retry = run_times(deployment.webserver, tag(lost, "dagster/auto_retry_run_id"))
    assert retry["parentRunId"] == killed.run_id  # the UI links the retry to the run it replaces
    assert retry["status"] == "SUCCESS"
    [live] = set(WORKERS) - {killed.host}
    assert tag(retry, "fw_assets/host") == live
    print(f"killed {killed.host} during {killed.step}; run failed {lost['endTime'] - killed.at:.1f}s later, "
          f"its retry started {retry['startTime'] - killed.at:.1f}s later on {live}")


def failure_messages(run: dict) -> list[str]:
    return [e["message"] for e in run["eventConnection"]["events"] if e["__typename"] == "RunFailureEvent"]


def test_after_the_kill_every_dump_is_published_as_one_machine_publishes_it(deployment, killed, one_machine):
    assert_every_dump_as_one_machine_publishes_it(deployment, one_machine)


def test_after_the_kill_every_check_is_on_its_dumps_latest_materialization(deployment, killed):
    assert_every_check_on_its_dump(deployment)


def test_after_the_kill_no_run_is_left_started_and_no_dump_ran_twice_at_once(deployment, killed):
    assert {run["status"] for run in killed.runs} <= {"SUCCESS", "FAILURE"}
    assert [r["runId"] for r in killed.runs if r["status"] == "FAILURE"] == [killed.run_id]
    assert_no_dump_ran_twice_at_once(deployment, killed.runs)


def test_each_run_names_the_host_that_ran_it_as_status_does(deployment, killed):
    assert sorted(p.host for p in deployment.hosts_at_start if p.role == "worker") == list(WORKERS)
    assert {tag(run, "fw_assets/host") for run in killed.runs} <= set(WORKERS)


def test_a_worker_started_while_a_run_waits_takes_it_and_a_redis_restart_costs_nothing(
    deployment, redis_restarted, one_machine
):
    runs = redis_restarted.runs
    assert {run["status"] for run in runs} <= {"SUCCESS", "FAILURE"}
    waited = run_times(deployment.webserver, redis_restarted.waiting_run)
    assert waited["status"] == "SUCCESS" and tag(waited, "fw_assets/host") in WORKERS
    assert_every_dump_as_one_machine_publishes_it(deployment, one_machine)
    assert_every_check_on_its_dump(deployment)
    assert_no_dump_ran_twice_at_once(deployment, runs)


def test_status_lists_each_process_and_down_stops_every_one_up_started(deployment, redis_restarted):
    processes = deployment.local.status()
    assert sorted(p.role for p in processes) == sorted(["daemon", "postgres", "redis", "webserver", "worker", "worker"])
    assert sorted(p.host for p in processes if p.role == "worker") == list(WORKERS)
    started = deployment.local.processes()
    deployment.local.down()
    time.sleep(1)
    assert not [pid for pid in started if alive(pid)]
    assert not started_with(f"DAGSTER_HOME={deployment.local.home}")
    assert deployment.local.status() == []

"""The Celery deployment of deploy/celery/local.sh belongs to the user who started it, and a run it
gave up on never publishes. Two `up` at once start one deployment; another local user (`nobody`:
the tests run as root) reads none of its secrets, and Redis refuses them without the password; the
daemon runs with the environment the docs ask for. Then one dump is backfilled four times on two
workers, each time with something done to its run during one of its first steps: its heartbeat
key deleted in Redis (a live run is not failed for it), the run marked failed as run monitoring
marks a run whose host it took for lost (the run's processes stop and publish nothing more; its
status stays; its retry publishes), *Terminate* in the UI (the run's processes stop, the run is
canceled), and `local.sh down` (the run is retried on the worker that takes it after `up`, and the
backfill completes). The dump ends published byte for byte as one machine publishes it."""

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.celery_local import (
    DeployedWebserver,
    LocalDeployment,
    alive,
    backfill_status,
    run_events,
    run_times,
    settled,
    step_under_way,
    unsettled,
)
from bench.dagster_services import signing_asset_keys, tag, wait_for
from fw_assets.contracts.asset_checks import FORCE_TAG
from fw_assets.deploy.heartbeats import heartbeat_key
from fw_assets.lib.slots import machine_slot
from fw_assets.paths import machine_slots_dir
from fw_assets.resources import Warehouse
from fw_assets.run_health import DUCKDB_POOL
from fw_assets.synthetic import write_sample_dump
from fw_assets.tokenizing.resources import TokenizerResource
from fw_assets.tokenizing.tokenized import tokenized
from fw_assets_tests.support.deployment_folders import deployment_folders
from fw_assets_tests.support.postgres_server import find_postgres_binaries
from fw_assets_tests.support.runs import CHAIN, materialize_dump
from fw_assets_tests.support.trees import published_data, without_probe_losses

pytestmark = [pytest.mark.e2e, pytest.mark.needs_extra("celery")]

DUMP = "CC-MAIN-2013-20"
ROWS = 5_000
# The test acts while the run waits in one of its first steps for a DuckDB slot the test holds.
FIRST_STEPS = ("sampled",)  # the first step that takes a DuckDB slot
WORKERS = ("worker-1", "worker-2")
CORES_PER_WORKER = 1  # and one machine is compared at the same thread count
SETTLE_TIMEOUT = 420
ANOTHER_USER = "nobody"


@dataclass
class Deployment:
    local: LocalDeployment
    webserver: DeployedWebserver
    output: Path
    ups: list[subprocess.CompletedProcess]  # the two `up` started at once


@pytest.fixture(scope="module")
def folders():
    with deployment_folders("fw-celery-safety-") as paths:
        yield paths


@pytest.fixture(scope="module")
def deployment(folders):
    if shutil.which("redis-server") is None or find_postgres_binaries() is None or shutil.which("runuser") is None:
        pytest.skip("needs Debian's redis-server, postgresql and runuser: "
                    "apt-get install redis-server postgresql, as .ci/run does")
    local = LocalDeployment(folders["home"], folders["source"], folders["output"], len(WORKERS), CORES_PER_WORKER)
    try:
        with ThreadPoolExecutor(2) as pool:  # two shells of one user, each starting the deployment
            ups = list(pool.map(lambda _: local.run("up", check=False), range(2)))
        started = [up for up in ups if up.returncode == 0]
        assert started, f"neither `up` started the deployment:\n{ups[0].stderr}\n{ups[1].stderr}"
        webserver = DeployedWebserver(started[0].stdout.strip().splitlines()[-1], local.logs)
        webserver.stop_sensor("new_dumps")  # the dump is backfilled from the UI, the sensor off
        webserver.stop_probe_scoring()
        write_sample_dump(folders["source"], DUMP, rows=ROWS, files=1)
        yield Deployment(local, webserver, folders["output"], ups)
    finally:
        local.down()


@pytest.fixture(scope="module")
def one_machine(folders, deployment) -> dict[str, str]:
    host = {"warehouse": Warehouse(threads=CORES_PER_WORKER), "tokenizer": TokenizerResource()}
    materialize_dump(folders["source"], folders["one-machine"], DUMP, [*CHAIN, tokenized], extra_resources=host)
    return without_probe_losses(published_data(folders["one-machine"]))


def as_another_user(*command: str) -> subprocess.CompletedProcess:
    if os.geteuid() != 0:
        pytest.skip(f"reading as {ANOTHER_USER} needs root (runuser), as CI runs")
    return subprocess.run(["runuser", "-u", ANOTHER_USER, "--", *command], capture_output=True, text=True, timeout=60)


def test_two_ups_at_once_start_one_deployment(deployment):
    for up in deployment.ups:
        assert up.returncode == 0, f"local.sh up exited {up.returncode}:\n{up.stderr}"
    processes = deployment.local.status()
    assert sorted(p.role for p in processes) == sorted(["daemon", "postgres", "redis", "webserver", "worker", "worker"])
    assert sorted(p.host for p in processes if p.role == "worker") == list(WORKERS)


def test_another_user_reads_no_secret_of_the_deployment(deployment):
    state, environment = deployment.local.state, deployment.local.environment()
    secrets = [environment["DAGSTER_PG_PASSWORD"], redis_password(environment["FW_REDIS_URL"])]
    assert all(len(secret) >= 32 for secret in secrets)
    for path in (state / "env", state / "redis.conf", state / "logs" / "worker-1.log"):
        read = as_another_user("cat", str(path))
        assert read.returncode != 0 and "Permission denied" in read.stderr, f"{ANOTHER_USER} read {path}"
    assert as_another_user("ls", str(state)).returncode != 0
    for path in [state, *state.rglob("*")]:
        if path.is_relative_to(state / "postgres"):  # PostgreSQL's own, mode 0700
            continue
        mode = path.lstat().st_mode
        assert not mode & stat.S_IRWXO, f"{path} is open to other users: {stat.filemode(mode)}"
        # as root, the postgres group may pass through local/ and logs/ (to its data and its log)
        assert not mode & stat.S_IRWXG or (path in (state, state / "logs") and mode & stat.S_IRWXG == stat.S_IXGRP)
    processes = as_another_user("ps", "-eo", "args").stdout
    assert "redis-server" in processes and "celery_worker" in processes
    assert not [secret for secret in secrets if secret in processes], "a password is on a command line"


def redis_password(url: str) -> str:
    return url.removeprefix("redis://:").split("@", 1)[0]


def test_redis_refuses_another_user_without_the_password(deployment):
    port = deployment.local.environment()["FW_REDIS_URL"].rsplit(":", 1)[1].split("/")[0]
    answer = as_another_user("redis-cli", "-p", port, "keys", "*")
    assert "NOAUTH Authentication required" in answer.stdout + answer.stderr


def test_the_daemon_runs_with_the_environment_the_docs_ask_for(deployment):
    environ = Path(f"/proc/{deployment.local.pid('daemon')}/environ").read_bytes().split(b"\0")
    assert b"DAGSTER_BACKFILL_RETRY_DEFINITION_CHANGED_ERROR=1" in environ


@contextmanager
def heavy_steps_held(deployment: Deployment) -> Iterator[None]:
    """The test holds every worker's DuckDB slot (fw_assets.lib.slots, as a run's step holds it):
    a run's first heavy step waits, its process alive and beating, until the case has acted."""
    holder = {"run_id": "the test", "step": "holding the slot", "partition": DUMP, "host": "the test"}
    with ExitStack() as held:
        for host in WORKERS:
            held.enter_context(machine_slot(machine_slots_dir(deployment.output, host), DUCKDB_POOL, 1, holder,
                                            print, str))
        yield


def backfill_under_way(deployment: Deployment) -> tuple[str, str, str]:
    """A backfill of the dump, once one of its first steps is under way (call it holding the heavy
    steps): the backfill, its run, its host. Its steps redo their work (the dump is unchanged
    since an earlier case)."""
    webserver = deployment.webserver
    backfill_id = webserver.launch_backfill(signing_asset_keys(), [DUMP], {FORCE_TAG: "true"})
    run, _, host = wait_for("one of the first steps under way on a worker",
                            lambda: step_under_way(webserver, backfill_id, FIRST_STEPS),
                            240, every=0.2, logs=deployment.local.logs)
    return backfill_id, run["runId"], host


def wait_until_settled(deployment: Deployment) -> list[dict]:
    webserver = deployment.webserver
    try:
        return wait_for("every run to end and the dump's decisions to be current",
                        lambda: settled(webserver, [DUMP]), SETTLE_TIMEOUT, every=3, logs=deployment.local.logs)
    except AssertionError as error:  # what was still waited for last: CI keeps an error's tail
        raise AssertionError(f"{error}\n--- still waited for ---\n{unsettled(webserver, [DUMP])}") from None


def events_of(deployment: Deployment, run_id: str, typename: str) -> list[dict]:
    return [e for e in run_events(deployment.webserver, run_id) if e["__typename"] == typename]


def backfill_runs(runs: list[dict], backfill_id: str) -> list[dict]:
    return [run for run in runs if tag(run, "dagster/backfill") == backfill_id]


def assert_published_as_one_machine_publishes(deployment: Deployment, one_machine: dict[str, str]) -> None:
    published = without_probe_losses(published_data(deployment.output))
    paths = one_machine.keys() | published.keys()
    differing = sorted(path for path in paths if one_machine.get(path) != published.get(path))
    assert not differing, f"{len(differing)} files differ from one machine's: {differing[:10]}"


MONITORING_SAW_IT_ALIVE = "Run monitoring: No heartbeat in Redis, but the run's process"


@dataclass(frozen=True)
class Outcome:
    backfill_id: str
    run_id: str  # the run something was done to
    runs: list[dict]  # every run, settled


@pytest.fixture(scope="module")
def heartbeat_deleted(deployment) -> Outcome:
    """The run's heartbeat key deleted again and again (as a worker's lost connection to Redis
    would leave it missing) until run monitoring has looked at the run without it."""
    from redis import Redis

    client = Redis.from_url(deployment.local.environment()["FW_REDIS_URL"])
    with heavy_steps_held(deployment):
        backfill_id, run_id, _ = backfill_under_way(deployment)

        def monitoring_looked_or_the_run_ended() -> bool:
            client.delete(heartbeat_key(run_id))
            looked = any(MONITORING_SAW_IT_ALIVE in e["message"] for e in events_of(deployment, run_id, "EngineEvent"))
            return looked or run_times(deployment.webserver, run_id)["status"] != "STARTED"

        wait_for(f"run monitoring to look at run {run_id} while its heartbeat key is deleted",
                 monitoring_looked_or_the_run_ended, 120, every=0.1, logs=deployment.local.logs)
    return Outcome(backfill_id, run_id, wait_until_settled(deployment))


def test_a_deleted_heartbeat_does_not_fail_a_live_run(deployment, heartbeat_deleted, one_machine):
    assert not events_of(deployment, heartbeat_deleted.run_id, "RunFailureEvent")
    runs = backfill_runs(heartbeat_deleted.runs, heartbeat_deleted.backfill_id)
    assert [(r["runId"], r["status"]) for r in runs] == [(heartbeat_deleted.run_id, "SUCCESS")], "one run, never failed"
    looked = [e["message"] for e in events_of(deployment, heartbeat_deleted.run_id, "EngineEvent")
              if MONITORING_SAW_IT_ALIVE in e["message"]]
    assert looked, "run monitoring never looked at the run while its heartbeat was missing"
    assert "runs on this machine" in looked[0] and "Not lost" in looked[0]
    assert_published_as_one_machine_publishes(deployment, one_machine)


MARK_FAILED = """
import sys
import dagster as dg
with dg.DagsterInstance.get() as instance:
    run = instance.get_run_by_id(sys.argv[1])
    print(run.status.value)
    instance.report_run_failed(run, message=sys.argv[2])
"""
MARKED = "Lost the run's host (marked so by the test, as run monitoring marks a run)."


@pytest.fixture(scope="module")
def marked_failed(deployment) -> Outcome:
    with heavy_steps_held(deployment):
        backfill_id, run_id, _ = backfill_under_way(deployment)
        marked = deployment.local.python(MARK_FAILED, run_id, MARKED)
    assert marked.stdout.strip() == "STARTED", f"run {run_id} ended before the test marked it: {marked.stdout}"
    return Outcome(backfill_id, run_id, wait_until_settled(deployment))


def test_a_run_marked_failed_while_it_runs_stops_and_publishes_nothing_more(deployment, marked_failed, one_machine):
    run_id = marked_failed.run_id
    events = run_events(deployment.webserver, run_id)
    [failure] = [i for i, e in enumerate(events) if e["__typename"] == "RunFailureEvent"]
    assert events[failure]["message"] == MARKED  # the only failure: no other status was reported after it
    before, after = events[:failure], events[failure + 1:]
    assert not [e for e in after if e["__typename"] == "RunSuccessEvent"]
    # Only the step under way when it was marked may still say it published (before the mark); a
    # step started after the mark publishes nothing.
    started_before = {e["stepKey"] for e in before if e["__typename"] == "ExecutionStepStartEvent"}
    published_after = [e for e in after if e["__typename"] == "MaterializationEvent"]
    assert not [e for e in published_after if e["stepKey"] not in started_before], published_after
    # by its worker at the next beat, or by the fence of its next publication, whichever came first
    stopped = [e["message"] for e in after if e["message"].startswith("Stopped the run's process")
               or "stopped before " in e["message"]]
    assert stopped and "no longer the live run of its partition" in stopped[0]
    print(f"marked run {run_id} failed; {stopped[0][:60]}…")
    marked = run_times(deployment.webserver, run_id)
    assert marked["status"] == "FAILURE"
    retry = run_times(deployment.webserver, tag(marked, "dagster/auto_retry_run_id"))
    assert retry["parentRunId"] == run_id and retry["status"] == "SUCCESS"
    assert_published_as_one_machine_publishes(deployment, one_machine)


TERMINATE = """mutation($id: String!) { terminateRun(runId: $id) {
  __typename ... on TerminateRunFailure { message } ... on PythonError { message } } }"""


@pytest.fixture(scope="module")
def terminated(deployment) -> Outcome:
    """*Terminate* pressed on the run's page during one of its first steps."""
    with heavy_steps_held(deployment):
        backfill_id, run_id, _ = backfill_under_way(deployment)
        answer = deployment.webserver.graphql(TERMINATE, {"id": run_id})["terminateRun"]
        assert answer["__typename"] == "TerminateRunSuccess", answer
        wait_for(f"run {run_id} to be canceled",
                 lambda: run_times(deployment.webserver, run_id)["status"] == "CANCELED",
                 60, every=0.5, logs=deployment.local.logs)
    return Outcome(backfill_id, run_id, [])


def test_terminate_stops_a_runs_processes_and_cancels_it(deployment, terminated):
    canceled = run_times(deployment.webserver, terminated.run_id)
    [message] = [e["message"] for e in events_of(deployment, terminated.run_id, "RunCanceledEvent")]
    assert message.startswith("Terminated: its process on worker-") and message.endswith("was stopped.")
    assert canceled["status"] == "CANCELED"
    started = [e["message"] for e in events_of(deployment, terminated.run_id, "EngineEvent")
               if e["message"].startswith("Started process for run (pid: ")]
    run_process = int(started[0].removeprefix("Started process for run (pid: ").split(")")[0])
    assert not alive(run_process), "the run's process outlived its run"


FINISHED_BACKFILL = ("COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED")


@pytest.fixture(scope="module")
def stopped_by_down(deployment) -> Outcome:
    with heavy_steps_held(deployment):
        backfill_id, run_id, _ = backfill_under_way(deployment)
        deployment.local.down()
    deployment.local.up()
    runs = wait_until_settled(deployment)
    wait_for(f"the backfill {backfill_id} to finish",
             lambda: backfill_status(deployment.webserver, backfill_id) in FINISHED_BACKFILL,
             180, every=2, logs=deployment.local.logs)
    return Outcome(backfill_id, run_id, runs)


def test_down_during_a_run_leaves_it_retried_on_the_next_worker_and_the_backfill_completes(
    deployment, stopped_by_down, one_machine
):
    run_id = stopped_by_down.run_id
    stopped = run_times(deployment.webserver, run_id)
    [failure] = [e["message"] for e in events_of(deployment, run_id, "RunFailureEvent")]
    assert failure.startswith("Worker worker-") and "was stopped (SIGTERM) during this run" in failure
    assert not events_of(deployment, run_id, "ExecutionStepFailureEvent"), "no step failed on its data"
    assert tag(stopped, "dagster/will_retry") == "true"
    retry = run_times(deployment.webserver, tag(stopped, "dagster/auto_retry_run_id"))
    assert retry["parentRunId"] == run_id and retry["status"] == "SUCCESS"
    assert backfill_status(deployment.webserver, stopped_by_down.backfill_id) == "COMPLETED_SUCCESS"
    assert_published_as_one_machine_publishes(deployment, one_machine)


def test_down_leaves_no_process_of_the_deployment(deployment, stopped_by_down):
    started = deployment.local.processes()
    deployment.local.down()
    wait_for("every process of the deployment to end", lambda: not [p for p in started if alive(p)], 30, every=0.2)
    assert deployment.local.status() == []

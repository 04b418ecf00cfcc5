"""A worker's runs, each executed in a run process that the worker sees through: the process group is
killed at the next beat once the run is no longer live (run monitoring failed it, a person
terminates it), and nothing changes the status it was given; a worker asked to stop kills it and
marks the run failed, to be retried; a run process that dies by itself has its run marked failed;
one that ends its run itself is left to finish; a second delivery of a run's task executes nothing."""

import os
import signal
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import dagster as dg
import psutil
import pytest

from fw_assets.deploy.heartbeats import RunHeartbeat, heartbeat_key
from fw_assets.settings import HOST_ENV
from fw_assets_tests.support.runs import unfinished_run

DUMP = "CC-MAIN-2013-20"
BEAT = 0.2
TIMEOUT = 30
# A run process with a child of its own, in its group: both must end with the run.
SLEEPERS = ["sh", "-c", "sleep 60 & sleep 60"]

# run_supervisor.py hooks into the Celery worker's shutdown.
pytestmark = pytest.mark.needs_extra("celery")


class RecordedRedis:
    """The two commands a RunHeartbeat sends, kept in a dict."""

    def __init__(self):
        self.keys = {}

    def set(self, key, value, ex):
        self.keys[key] = value

    def delete(self, key):
        self.keys.pop(key, None)


@pytest.fixture
def instance(tmp_path, monkeypatch):
    monkeypatch.setenv(HOST_ENV, "worker-7")
    overrides = {"run_retries": {"enabled": True, "max_retries": 2, "retry_on_asset_or_op_failure": False}}
    with dg.DagsterInstance.local_temp(str(tmp_path), overrides=overrides) as instance:
        yield instance


@pytest.fixture
def redis():
    return RecordedRedis()


@pytest.fixture
def supervisor(instance, redis):
    from fw_assets.deploy.run_supervisor import RunSupervisor

    def heartbeat(run_id, holder):
        return RunHeartbeat(redis, run_id, holder, BEAT, 30).start()

    return RunSupervisor(instance, heartbeat, BEAT)


@pytest.fixture
def background():
    with ThreadPoolExecutor(1) as pool:
        yield pool


def wait_until(predicate, what: str):
    deadline = time.monotonic() + TIMEOUT
    while not (found := predicate()):
        assert time.monotonic() < deadline, f"gave up after {TIMEOUT}s waiting for {what}"
        time.sleep(0.05)
    return found


def group_alive(group: int) -> bool:
    """A process of `group` runs (a zombie does not: it waits to be reaped by whoever adopted it)."""
    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) == group and process.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except ProcessLookupError:
            continue
    return False


def wait_for_group_gone(group: int) -> None:
    wait_until(lambda: not group_alive(group), f"every process of the run's group {group} to end")


def started_run(instance, supervisor, background, command=SLEEPERS):
    run_id = unfinished_run(instance, DUMP, dg.DagsterRunStatus.STARTING)
    execution = background.submit(supervisor.execute, run_id, command)
    process = wait_until(lambda: supervisor.process, "the run process to start")
    wait_until(lambda: len(psutil.Process(process.pid).children()) == 2, "the run process's children")
    return run_id, execution, process


def events(instance, run_id, event_type):
    return [r.event_log_entry for r in instance.get_records_for_run(run_id, of_type=event_type).records]


def test_a_run_failed_by_run_monitoring_has_its_process_group_killed_at_the_next_beat(
    instance, supervisor, background, redis
):
    run_id, execution, process = started_run(instance, supervisor, background)
    instance.report_run_failed(instance.get_run_by_id(run_id), message="Lost the run's host worker-7: ...")
    assert execution.result(TIMEOUT) == -signal.SIGKILL
    wait_for_group_gone(process.pid)
    run = instance.get_run_by_id(run_id)
    assert run.status == dg.DagsterRunStatus.FAILURE
    [failure] = events(instance, run_id, dg.DagsterEventType.RUN_FAILURE)
    assert failure.dagster_event.message.startswith("Lost the run's host")  # its status as monitoring gave it
    stopped = [e.message for e in events(instance, run_id, dg.DagsterEventType.ENGINE_EVENT) if "Stopped" in e.message]
    assert len(stopped) == 1 and "the run is FAILURE" in stopped[0] and "no longer the live run" in stopped[0]
    assert heartbeat_key(run_id) not in redis.keys


def test_a_stopped_worker_kills_its_run_process_and_marks_the_run_failed_to_be_retried(
    instance, supervisor, background, redis
):
    run_id, execution, process = started_run(instance, supervisor, background)
    assert heartbeat_key(run_id) in redis.keys
    supervisor.worker_stopping("SIGTERM")
    assert execution.result(TIMEOUT) == -signal.SIGKILL
    wait_for_group_gone(process.pid)
    run = instance.get_run_by_id(run_id)
    assert run.status == dg.DagsterRunStatus.FAILURE
    assert run.tags["dagster/will_retry"] == "true"
    [failure] = events(instance, run_id, dg.DagsterEventType.RUN_FAILURE)
    assert failure.dagster_event.message.startswith("Worker worker-7 was stopped (SIGTERM) during this run")
    assert "nothing it had half done is visible" in failure.dagster_event.message
    assert heartbeat_key(run_id) not in redis.keys


def test_a_run_process_that_dies_by_itself_has_its_run_marked_failed_to_be_retried(instance, supervisor, background):
    run_id = unfinished_run(instance, DUMP, dg.DagsterRunStatus.STARTING)
    assert supervisor.execute(run_id, ["sh", "-c", "kill -KILL $$"]) == -signal.SIGKILL
    run = instance.get_run_by_id(run_id)
    assert run.status == dg.DagsterRunStatus.FAILURE and run.tags["dagster/will_retry"] == "true"
    [failure] = events(instance, run_id, dg.DagsterEventType.RUN_FAILURE)
    assert "The run's process on worker-7 ended without ending the run (killed by SIGKILL" in failure.message


def test_a_run_being_terminated_has_its_process_group_killed_and_is_canceled(instance, supervisor, background):
    run_id, execution, process = started_run(instance, supervisor, background)
    instance.report_run_canceling(instance.get_run_by_id(run_id))
    assert execution.result(TIMEOUT) == -signal.SIGKILL
    wait_for_group_gone(process.pid)
    assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.CANCELED


# A run process that ends its run as Dagster's run worker does (the event carries its pid), then
# takes a few beats to exit.
_ENDING_ITS_RUN = """
import os, sys, time
import dagster as dg
from dagster._core.events import DagsterEvent
instance = dg.DagsterInstance.get()
run = instance.get_run_by_id(sys.argv[1])
event = DagsterEvent(dg.DagsterEventType.RUN_FAILURE.value, run.job_name, message="a step failed", pid=os.getpid())
instance.report_dagster_event(event, run_id=run.run_id)
time.sleep(1)
sys.exit(1)
"""


def test_a_run_process_that_ends_its_run_itself_is_left_to_exit(instance, supervisor, monkeypatch):
    run_id = unfinished_run(instance, DUMP, dg.DagsterRunStatus.STARTING)
    monkeypatch.setenv("DAGSTER_HOME", instance.root_directory)  # the run process's instance is the test's
    assert supervisor.execute(run_id, [sys.executable, "-c", _ENDING_ITS_RUN, run_id]) == 1
    messages = [e.message for e in events(instance, run_id, dg.DagsterEventType.ENGINE_EVENT)]
    assert not [m for m in messages if "Stopped" in m]
    [failure] = events(instance, run_id, dg.DagsterEventType.RUN_FAILURE)
    assert failure.dagster_event.message == "a step failed"


def test_a_second_delivery_of_a_started_runs_task_executes_nothing(instance, supervisor, tmp_path_factory):
    run_id = unfinished_run(instance, DUMP, dg.DagsterRunStatus.STARTED)
    witness = tmp_path_factory.mktemp("witness") / "executed"
    assert supervisor.execute(run_id, ["touch", str(witness)]) == 0
    assert not witness.exists()
    assert "fw_assets/host" not in instance.get_run_by_id(run_id).tags

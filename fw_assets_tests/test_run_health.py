"""A run killed with kill -9 never blocks the runs after it: its machine slot is freed with its
process, the next run marks it failed, a waiting step says who holds the slot and stops when asked,
and tokenizer workers die with their run. A run failed from outside while its process still runs
publishes nothing more; a run's process is checked only on its own machine."""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import psutil
import pytest

from bench.dagster_services import DagsterServices
from fw_assets.bucketing.raw import raw
from fw_assets.bucketing.sampled import sampled
from fw_assets.lib.slots import machine_slot, slot_holders
from fw_assets.run_health import HOST_TAG, MACHINE_TAG, PID_TAG, how_to_free, run_process_alive, this_process
from fw_assets.settings import HOST_ENV, SENSOR_INTERVAL_ENV
from fw_assets.synthetic import write_sample_dump
from fw_assets_tests.support.runs import materialize_dump, subprocess_env, unfinished_run

DUMP, OTHER_DUMP, NEW_DUMP = "CC-MAIN-2014-10", "CC-MAIN-2014-15", "CC-MAIN-2014-23"


def test_a_waiting_step_names_the_holder_and_gets_the_slot_when_it_is_freed(tmp_path):
    messages, got = [], threading.Event()
    release = threading.Event()

    def hold():
        holder = {"run_id": "first-run"}
        with machine_slot(tmp_path, "duckdb", 1, holder, messages.append, lambda h: h["run_id"]):
            got.set()
            release.wait(10)

    first = threading.Thread(target=hold)
    first.start()
    got.wait(5)
    assert [h["run_id"] for h in slot_holders(tmp_path, "duckdb")] == ["first-run"]
    threading.Timer(0.5, release.set).start()
    with machine_slot(tmp_path, "duckdb", 1, {"run_id": "second"}, messages.append, str) as slot:
        assert slot == 0
    first.join()
    assert "Waiting for a duckdb slot" in messages[0] and "first-run" in messages[0]
    assert messages[-1].startswith("Got a duckdb slot after waiting")


def test_two_slots_let_two_steps_run_at_once(tmp_path):
    with machine_slot(tmp_path, "duckdb", 2, {"run_id": "a"}, print, str) as first:
        with machine_slot(tmp_path, "duckdb", 2, {"run_id": "b"}, print, str) as second:
            assert {first, second} == {0, 1}
            assert sorted(h["run_id"] for h in slot_holders(tmp_path, "duckdb")) == ["a", "b"]
    assert slot_holders(tmp_path, "duckdb") == []


def test_a_host_named_by_fw_host_tags_its_runs_and_holds_its_own_slots(tmp_path, monkeypatch):
    """Several hosts (Celery workers) may share one machine and one output folder: each is the host
    FW_HOST names, in its runs' tags and in the folder of its slots."""
    monkeypatch.setenv(HOST_ENV, "worker-7")
    source, output = tmp_path / "source", tmp_path / "out"
    write_sample_dump(source, DUMP, rows=200, files=1, seed=3)
    with dg.DagsterInstance.ephemeral() as instance:
        result = materialize_dump(source, output, DUMP, [raw, sampled], instance)
        assert instance.get_run_by_id(result.run_id).tags[HOST_TAG] == "worker-7"
    assert [folder.name for folder in (output / ".staging" / "slots").iterdir()] == ["worker-7"]


def cli_run(source: Path, output: Path, home: Path, dump: str, select: str, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "fw_assets.definitions",
         "--select", select, "--partition", dump],
        env=subprocess_env(source, output, home), start_new_session=True, **popen,
    )


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


@pytest.mark.e2e
def test_a_cli_run_killed_mid_step_is_failed_and_never_blocks_the_next_run(tmp_path, dagster_home):
    source, output = tmp_path / "source", tmp_path / "out"
    write_sample_dump(source, DUMP, rows=60_000, files=3, seed=11)
    killed = cli_run(source, output, dagster_home, DUMP, "sampled", stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: list((output / ".staging").glob(f"sampled-{DUMP}.*")), 120, "sampling")
    finally:
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait()

    nxt = cli_run(source, output, dagster_home, DUMP, "sampled", stderr=subprocess.PIPE, text=True)
    _, log = nxt.communicate(timeout=300)
    assert nxt.returncode == 0, log[-3000:]
    assert "Marked failed by a later run" in log
    with dg.DagsterInstance.get() as instance:
        statuses = sorted(r.status.value for r in instance.get_runs())
    assert statuses == ["FAILURE", "SUCCESS"], "the killed run no longer counts as running"


@pytest.mark.e2e
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_run_waiting_for_a_slot_says_who_holds_it_and_stops_when_asked(
    tmp_path, dagster_home, stop
):
    source, output = tmp_path / "source", tmp_path / "out"
    write_sample_dump(source, DUMP, rows=500, files=1, seed=3)
    slots = output / ".staging" / "slots" / os.uname().nodename
    holder = {"run_id": "run-holding-duckdb", "step": "bucketed", "partition": f"dump {OTHER_DUMP}", "host": "here"}
    with machine_slot(slots, "duckdb", 1, holder, print, how_to_free):
        waiting = cli_run(source, output, dagster_home, DUMP, "sampled", stderr=subprocess.PIPE, text=True)
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(waiting.stderr), daemon=True)
        reader.start()
        wait_until(lambda: any("Waiting for a duckdb slot" in line for line in lines), 120, "the wait")
        message = next(line for line in lines if "Waiting for a duckdb slot" in line)
        for expected in ("run-holding-duckdb", f"bucketed of dump {OTHER_DUMP}", "kill ", "Terminate"):
            assert expected.lower() in message.lower(), message
        os.killpg(waiting.pid, stop)
        assert waiting.wait(timeout=30) != 0, "the waiting run stopped"
    assert not (output / "selection").exists()


SPAWN_ENCODER = """
import sys, time
from fw_assets.tokenizing.encode import ParallelEncoder
from fw_assets.tokenizing.resources import TokenizerResource
# tiktoken encodes in worker processes (fastokens on threads of this one)
with ParallelEncoder(TokenizerResource(workers=2, backend="tiktoken").spec(), 2) as encoder:
    list(encoder.encode([["a few words"]] * 4))
    print("encoded", flush=True)
    time.sleep(600)
"""


@pytest.mark.e2e
def test_tokenizer_workers_die_with_a_killed_run():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.Popen([sys.executable, "-c", SPAWN_ENCODER], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline().strip() == "encoded"
        workers = [p for p in psutil.Process(run.pid).children() if "python" in p.name().lower()]
        assert len(workers) >= 2
    finally:
        run.kill()
        run.wait()

    def all_gone():
        return all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in workers)

    wait_until(all_gone, 15, "the orphaned workers to exit")



@pytest.mark.e2e
def test_two_killed_cli_runs_never_hold_the_run_queue(tmp_path, dagster_home):
    """Two CLI runs killed -9 stay STARTED in Dagster's history; left so, they would fill
    max_concurrent_runs (2) and the sensor's runs would queue forever. The sensor's tick fails them,
    and the new dump's run finishes."""
    home, source, output = dagster_home, tmp_path / "source", tmp_path / "out"
    killed = []
    slots = output / ".staging" / "slots" / os.uname().nodename
    # The test holds the only duckdb slot, so both runs are STARTED and waiting when killed, however
    # fast or slow this machine is.
    with dg.DagsterInstance.get():  # create the instance's SQLite schema before two processes race to
        pass
    with machine_slot(slots, "duckdb", 1, {"run_id": "the test"}, print, how_to_free):
        for dump in (DUMP, OTHER_DUMP):
            write_sample_dump(source, dump, rows=3_000, files=2, seed=5)
            killed.append(cli_run(source, output, home, dump, "sampled", stderr=subprocess.DEVNULL))
        try:
            with dg.DagsterInstance.get() as instance:
                wait_until(
                    lambda: sum(PID_TAG in r.tags for r in instance.get_runs()) == 2,
                    120,
                    "both runs to start",
                )
        finally:
            for run in killed:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait()
    for dump in (DUMP, OTHER_DUMP):  # only the new dump is for the sensor to process
        shutil.rmtree(source / "data" / dump)

    services = DagsterServices(
        home, {"FW_SOURCE_DIR": str(source), "FW_OUTPUT_DIR": str(output), SENSOR_INTERVAL_ENV: "5"}
    )
    try:
        services.wait_until_ready()
        write_sample_dump(source, NEW_DUMP, rows=500, files=1, seed=6)
        tags = {"dagster/sensor_name": "new_dumps", "dagster/partition": NEW_DUMP}
        services.wait_for_runs("the sensor's run of the new dump", tags, 1)
    finally:
        services.stop()
    with dg.DagsterInstance.get() as instance:
        cli_runs = [r for r in instance.get_runs() if "dagster/sensor_name" not in r.tags]
    assert sorted(r.status.value for r in cli_runs) == ["FAILURE", "FAILURE"]


def test_a_runs_process_is_checked_on_its_own_machine_only():
    tags = this_process()
    assert run_process_alive(tags) is True
    ended = subprocess.Popen(["true"])
    ended.wait()
    assert run_process_alive({**tags, PID_TAG: str(ended.pid)}) is False
    assert run_process_alive({**tags, MACHINE_TAG: "another-boot pid:[4026531836]"}) is None
    assert run_process_alive({HOST_TAG: "worker-1"}) is None


# A child materializes `raw` and `sampled` of a dump; just before `sampled` publishes, its run is
# marked failed from outside, as run monitoring marks a run whose host it took for lost.
_FAILED_BEFORE_PUBLISHING = """
import sys
from pathlib import Path
import dagster as dg
from fw_assets.bucketing.raw import raw
from fw_assets.bucketing.sampled import sampled
from fw_assets.lib import publish
from fw_assets_tests.support.runs import materialize_dump
instance = dg.DagsterInstance.get()
real_publish = publish.Staging.publish
def publish_once_failed(staging, *args, **kwargs):
    [run] = instance.get_runs(limit=1)
    instance.report_run_failed(run, message="Lost the run's host (as run monitoring says)")
    return real_publish(staging, *args, **kwargs)
publish.Staging.publish = publish_once_failed
materialize_dump(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], [raw, sampled], instance)
"""


@pytest.mark.e2e
def test_a_step_of_a_run_failed_from_outside_ends_its_process_before_it_publishes(tmp_path, dagster_home):
    source, output = tmp_path / "source", tmp_path / "out"
    write_sample_dump(source, DUMP, rows=300, files=1, seed=3)
    child = subprocess.run(
        [sys.executable, "-c", _FAILED_BEFORE_PUBLISHING, str(source), str(output), DUMP],
        env={**subprocess_env(source, output, dagster_home), "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True, text=True, timeout=300,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    assert not (output / "selection").exists() and not (output / "published" / f"sampled-{DUMP}.json").exists()
    with dg.DagsterInstance.get() as instance:
        [run] = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.FAILURE  # as it was given: no success reported after
        records = instance.get_records_for_run(run.run_id).records
    types = [r.event_log_entry.dagster_event_type for r in records]
    assert types.count(dg.DagsterEventType.RUN_FAILURE) == 1 and dg.DagsterEventType.RUN_SUCCESS not in types
    [stopped] = [r.event_log_entry.message for r in records if "stopped before publishing" in r.event_log_entry.message]
    assert f"stopped before publishing sampled-{DUMP}: the run is FAILURE" in stopped
    assert "no longer the live run of its partition" in stopped


def test_a_step_of_a_live_run_publishes(tmp_path):
    source, output = tmp_path / "source", tmp_path / "out"
    write_sample_dump(source, DUMP, rows=300, files=1, seed=3)
    with dg.DagsterInstance.ephemeral() as instance:
        unfinished_run(instance, OTHER_DUMP, dg.DagsterRunStatus.FAILURE)  # another run's status is not this one's
        materialize_dump(source, output, DUMP, [raw, sampled], instance)
    assert (output / "published" / f"sampled-{DUMP}.json").exists()

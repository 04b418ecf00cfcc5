"""A Celery worker standing for one host: it takes runs from its queues, one at a time, and executes
each in a run process of its own, which it sees through (fw_assets.deploy.run_supervisor).

    python -m fw_assets.deploy.celery_worker --host NAME [--cores N] [--queues dumps,recipes]

The broker, the result backend and the heartbeat settings are the run launcher's in DAGSTER_HOME's
dagster.yaml (deploy/celery/dagster.yaml), the same file the webserver and the daemon read. The
worker is the host `--host` names (default: $FW_HOST, else the machine's name): its runs' tags say
so, and its heavy steps take that host's slots. While it executes a run it writes the run's
heartbeat (fw_assets.deploy.heartbeats), by which the daemon tells a lost host from a busy one,
and reads the run's status, by which it stops a run that is no longer live. SIGTERM (or SIGINT)
stops the worker cleanly: its run is marked failed, to be retried on the next worker.
"""

import argparse
import logging
import os

import dagster as dg
from dagster._grpc.types import ExecuteRunArgs
from dagster._serdes import unpack_value
from dagster_celery.config import TASK_EXECUTE_JOB_NAME

from fw_assets.deploy.celery_launcher import HeartbeatCeleryRunLauncher
from fw_assets.deploy.heartbeats import RunHeartbeat
from fw_assets.deploy.run_supervisor import RunSupervisor, run_process_command
from fw_assets.settings import HOST_ENV, host_name

logger = logging.getLogger(__name__)


def supervisor_of(instance: dg.DagsterInstance, launcher: HeartbeatCeleryRunLauncher) -> RunSupervisor:
    """The supervisor of this worker's runs, beating as the run launcher's config says."""

    def heartbeat(run_id: str, holder: dict[str, str]) -> RunHeartbeat:
        return RunHeartbeat(
            launcher.heartbeat_client(), run_id, holder, launcher.heartbeat_seconds, launcher.lost_after_seconds
        ).start()

    return RunSupervisor(instance, heartbeat, launcher.heartbeat_seconds)


def register_execute_task(app, supervisor: RunSupervisor) -> None:
    """The task the run launcher sends (dagster-celery's name and arguments), executed by `supervisor`."""

    @app.task(bind=True, name=TASK_EXECUTE_JOB_NAME, track_started=True)
    def execute_run(_task, execute_job_args_packed) -> int:
        run_id = unpack_value(execute_job_args_packed, as_type=ExecuteRunArgs).run_id
        return supervisor.execute(run_id, run_process_command(run_id))


def limit_cores(cores: int) -> list[int]:
    """Keep this process (and every process it starts) on `cores` of the CPUs it may use now;
    fw_assets.lib.cores sizes DuckDB and the tokenizer by that affinity."""
    available = sorted(os.sched_getaffinity(0))
    if not 1 <= cores <= len(available):
        raise SystemExit(f"--cores {cores}: this process may use {len(available)} CPUs ({available})")
    os.sched_setaffinity(0, available[:cores])
    return available[:cores]


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m fw_assets.deploy.celery_worker", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--host", default=host_name(),
                        help="this host's name in runs' tags and slots (default: $FW_HOST, else the machine's name)")
    parser.add_argument("--cores", type=int, help="how many of its CPUs this host's runs may use (default: all)")
    parser.add_argument("--queues",
                        help="comma-separated queues to take runs from (default: every queue of the run launcher)")
    parser.add_argument("--loglevel", default="INFO")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    arguments = parse_arguments(argv)
    os.environ[HOST_ENV] = arguments.host  # settings.host_name() of this process and its run processes
    cores = limit_cores(arguments.cores) if arguments.cores else sorted(os.sched_getaffinity(0))
    instance = dg.DagsterInstance.get()
    launcher = instance.run_launcher
    if not isinstance(launcher, HeartbeatCeleryRunLauncher):
        raise SystemExit(
            f"DAGSTER_HOME's dagster.yaml runs {type(launcher).__name__}, not fw_assets' Celery run "
            "launcher: copy deploy/celery/dagster.yaml there"
        )
    queues = arguments.queues or ",".join(dict.fromkeys([*launcher.queues.values(), launcher.default_queue]))
    app = launcher.celery
    supervisor = supervisor_of(instance, launcher)
    register_execute_task(app, supervisor)  # the task the launcher sends; it never resumes a run
    supervisor.connect()
    logger.warning("fw_assets worker %s: queues %s, %d cores %s", arguments.host, queues, len(cores), cores)
    app.worker_main([
        "worker", "--pool=solo", "--concurrency=1", "--prefetch-multiplier=1",
        f"--hostname=fw_assets@{arguments.host}", f"--queues={queues}", f"--loglevel={arguments.loglevel}",
        "--without-gossip", "--without-mingle",
    ])


if __name__ == "__main__":
    main()

"""A Celery worker standing for one host: it takes runs from its queues, one at a time, and executes
each whole in its own process (Celery's solo pool: a prefork pool's daemonic children may not start
the tokenizer's processes).

    python -m fw_assets.deploy.celery_worker --host NAME [--cores N] [--queues dumps,recipes]

The broker, the result backend and the heartbeat settings are the run launcher's in DAGSTER_HOME's
dagster.yaml (deploy/celery/dagster.yaml), the same file the webserver and the daemon read. The
worker is the host `--host` names (default: $FW_HOST, else the machine's name): its runs' tags say
so, and its heavy steps take that host's slots. While it executes a run it writes the run's
heartbeat (fw_assets.deploy.heartbeats), by which the daemon tells a lost host from a busy one.
"""

import argparse
import logging
import os

import dagster as dg
from celery.signals import task_postrun, task_prerun
from dagster._grpc.types import ExecuteRunArgs
from dagster._serdes import unpack_value
from dagster_celery.config import TASK_EXECUTE_JOB_NAME
from dagster_celery.tasks import create_execute_job_task

from fw_assets.deploy.celery_launcher import HeartbeatCeleryRunLauncher
from fw_assets.deploy.heartbeats import RunHeartbeat
from fw_assets.run_health import HOST_TAG, PID_TAG, this_process
from fw_assets.settings import HOST_ENV, host_name

logger = logging.getLogger(__name__)


class RunHeartbeats:
    """Names this host in each run it starts, and beats for the run until its task ends."""

    def __init__(self, instance: dg.DagsterInstance, launcher: HeartbeatCeleryRunLauncher):
        self.instance = instance
        self.launcher = launcher
        self.beating: dict[str, RunHeartbeat] = {}

    def connect(self) -> None:
        task_prerun.connect(self.started, weak=False)
        task_postrun.connect(self.ended, weak=False)

    def started(self, task_id: str, task, kwargs: dict, **_) -> None:
        if task.name != TASK_EXECUTE_JOB_NAME:
            return
        run_id = unpack_value(kwargs["execute_job_args_packed"], as_type=ExecuteRunArgs).run_id
        tags = this_process()
        self.instance.add_run_tags(run_id, tags)  # before the run starts: its page names this host
        holder = {"host": tags[HOST_TAG], "pid": tags[PID_TAG]}
        self.beating[task_id] = RunHeartbeat(
            self.launcher.heartbeat_client(), run_id, holder,
            self.launcher.heartbeat_seconds, self.launcher.lost_after_seconds,
        ).start()

    def ended(self, task_id: str, **_) -> None:
        heartbeat = self.beating.pop(task_id, None)
        if heartbeat is not None:
            heartbeat.stop()


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
    os.environ[HOST_ENV] = arguments.host  # settings.host_name() of this process and its steps
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
    create_execute_job_task(app)  # the task the launcher sends; it never resumes a run
    RunHeartbeats(instance, launcher).connect()
    logger.warning("fw_assets worker %s: queues %s, %d cores %s", arguments.host, queues, len(cores), cores)
    app.worker_main([
        "worker", "--pool=solo", "--concurrency=1", "--prefetch-multiplier=1",
        f"--hostname=fw_assets@{arguments.host}", f"--queues={queues}", f"--loglevel={arguments.loglevel}",
        "--without-gossip", "--without-mingle",
    ])


if __name__ == "__main__":
    main()
